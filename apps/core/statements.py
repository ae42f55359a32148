"""A model's plain statements (INSERT of rows, UPDATE … WHERE, rows read back as instances)
with their SQL written once per process and database, and values adapted by the model's own
fields as the ORM adapts them.

Django compiles a query every time it runs: for a statement a worker makes with every run
(the call log's bulk INSERT, a run's outcome UPDATE, the claim) that compile is a large
part of the statement's CPU. ``ModelStatements`` writes the SQL once and adapts each value
with the same field method the ORM's compilers call (``pre_save`` and ``get_db_prep_save``
for written values, ``get_db_prep_value`` for compared ones, the backend's and field's
converters for read ones), so JSON, datetimes, decimals and UUIDs reach the database
exactly as through the ORM. Only plain values: an expression (``F()``, ``Value()``) is
refused, not compiled, and so is ``None`` in a WHERE (the ORM's ``IS NULL``).
No signals are sent (``bulk_create`` and ``update`` send none either).
"""

from __future__ import annotations

import threading

from django.db import connections, transaction
from django.db.models import Model
from django.db.models.sql import Query


class ModelStatements:
    """One model's statements for one database (see ``statements_for``)."""

    def __init__(self, model: type[Model], alias: str):
        self.model = model
        self.alias = alias
        connection = connections[alias]
        self.quote = connection.ops.quote_name
        self.table = self.quote(model._meta.db_table)
        self.fields = model._meta.concrete_fields
        self.attnames = [field.attname for field in self.fields]
        # (as the ORM inserts a row without its primary key: every other concrete column)
        self.insert_fields = [
            field for field in self.fields if not field.primary_key and not field.generated
        ]
        columns = ", ".join(self.quote(field.column) for field in self.insert_fields)
        self.insert_row = "(" + ", ".join(["%s"] * len(self.insert_fields)) + ")"
        self.insert_head = f"INSERT INTO {self.table} ({columns}) VALUES "
        self.returning = model._meta.db_returning_fields
        self.insert_tail = (
            " RETURNING " + ", ".join(self.quote(field.column) for field in self.returning)
            if connection.features.can_return_rows_from_bulk_insert
            else ""
        )
        compiler = Query(model).get_compiler(connection=connection)
        table = model._meta.db_table
        self.converters = list(
            compiler.get_converters([field.get_col(table) for field in self.fields]).items()
        )
        self.returning_converters = list(
            compiler.get_converters([field.get_col(table) for field in self.returning]).items()
        )
        self._updates: dict[tuple, str] = {}

    @property
    def connection(self):
        return connections[self.alias]  # (each thread has its own)

    def columns(self, qualified: bool = True) -> str:
        """Every concrete column, in ``instance``'s order (for a SELECT or a RETURNING)."""
        prefix = f"{self.table}." if qualified else ""
        return ", ".join(prefix + self.quote(field.column) for field in self.fields)

    def instance(self, values: list) -> Model:
        """An instance of the row read as ``columns()``, converted as the ORM converts it."""
        values = _converted(values, self.converters, self.connection)
        return self.model.from_db(self.alias, self.attnames, values)

    def insert(self, objs: list[Model]) -> None:
        """``bulk_create(objs)``: the same rows (``pre_save`` fills ``auto_now_add``
        fields on each instance), in batches the backend can take, primary keys set on the
        instances where the database returns them. Call it inside a transaction."""
        if not objs:
            return
        _refuse_placeholders(self.insert_fields)
        connection = self.connection
        for obj in objs:
            if obj.pk is not None:
                raise ValueError("insert() writes new rows only (no primary key set).")
            obj._prepare_related_fields_for_save(operation_name="bulk_create")
        size = max(connection.ops.bulk_batch_size(self.insert_fields, objs), 1)
        with transaction.mark_for_rollback_on_error(self.alias), connection.cursor() as cursor:
            for start in range(0, len(objs), size):
                batch = objs[start : start + size]
                params = []
                for obj in batch:
                    for field in self.insert_fields:
                        value = field.pre_save(obj, True)
                        _refuse_expression(value, field)
                        params.append(field.get_db_prep_save(value, connection=connection))
                sql = self.insert_head + ", ".join([self.insert_row] * len(batch))
                cursor.execute(sql + self.insert_tail, params)
                rows = cursor.fetchall() if self.insert_tail else []
                for obj, row in zip(batch, rows, strict=False):
                    row = _converted(list(row), self.returning_converters, connection)
                    for field, value in zip(self.returning, row, strict=True):
                        setattr(obj, field.attname, value)
        for obj in objs:
            obj._state.adding = False
            obj._state.db = self.alias

    def update(self, where: dict, values: dict) -> int:
        """``Model.objects.filter(**where).update(**values)`` for plain equalities and
        values; returns the number of rows changed."""
        names = (tuple(values), tuple(where))
        sql = self._updates.get(names)
        if sql is None:
            sql = self._updates[names] = self._update_sql(*names)
        connection = self.connection
        params = []
        for name, value in values.items():
            field = self._field(name)
            _refuse_expression(value, field)
            if hasattr(value, "prepare_database_save"):  # a model instance, as the ORM takes it
                if not field.remote_field:
                    raise TypeError(f"{field.name}: a model instance for a plain field.")
                params.append(value.prepare_database_save(field))
            else:
                params.append(field.get_db_prep_save(value, connection=connection))
        for name, value in where.items():
            field = self._field(name)
            _refuse_expression(value, field)
            if value is None:  # (the ORM makes that IS NULL)
                raise ValueError(f"{name}: None is not a value to compare with '='.")
            params.append(field.get_db_prep_value(value, connection, prepared=False))
        with transaction.mark_for_rollback_on_error(self.alias), connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount

    def _field(self, name: str):
        meta = self.model._meta
        return meta.pk if name == "pk" else meta.get_field(name)

    def _update_sql(self, names: tuple[str, ...], where: tuple[str, ...]) -> str:
        fields = [self._field(name) for name in names + where]
        _refuse_placeholders(fields)
        assignments = ", ".join(f"{self.quote(self._field(n).column)} = %s" for n in names)
        conditions = " AND ".join(
            f"{self.table}.{self.quote(self._field(n).column)} = %s" for n in where
        )
        return f"UPDATE {self.table} SET {assignments} WHERE ({conditions})"


def _refuse_placeholders(fields) -> None:
    # (a field with its own placeholder, e.g. a BinaryField on some backends, is not "%s")
    for field in fields:
        if hasattr(field, "get_placeholder"):
            raise TypeError(f"{field.name}: a field with its own placeholder (use the ORM).")


def _refuse_expression(value, field) -> None:
    if hasattr(value, "resolve_expression"):
        raise TypeError(f"{field.name}: an expression, not a value (use the ORM for it).")


def _converted(values: list, converters: list, connection) -> list:
    for position, (functions, expression) in converters:
        value = values[position]
        for function in functions:
            value = function(value, expression, connection)
        values[position] = value
    return values


_STATEMENTS: dict[tuple, ModelStatements] = {}
_LOCK = threading.Lock()


def statements_for(model: type[Model], alias: str = "default") -> ModelStatements:
    """The model's statements for database ``alias``, written once per process."""
    key = (model, alias)
    statements = _STATEMENTS.get(key)
    if statements is None:
        with _LOCK:
            statements = _STATEMENTS.get(key)
            if statements is None:
                statements = _STATEMENTS[key] = ModelStatements(model, alias)
    return statements
