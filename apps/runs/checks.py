"""System checks of what the run pipeline needs from the database."""

import sqlite3

from django.core.checks import Error, Tags, register
from django.db import connections

# A claim is one UPDATE … RETURNING (apps/runs/services/claims.py); SQLite has RETURNING
# since 3.35 (Django itself accepts 3.31).
SQLITE_RETURNING = (3, 35)


@register(Tags.database)
def sqlite_returning_check(app_configs, databases=None, **kwargs):
    errors = []
    for alias in databases or []:
        connection = connections[alias]
        if connection.vendor != "sqlite":
            continue
        if sqlite3.sqlite_version_info < SQLITE_RETURNING:
            errors.append(
                Error(
                    f"SQLite {sqlite3.sqlite_version} has no UPDATE … RETURNING, which run "
                    "claims use.",
                    hint="Use a Python built with SQLite 3.35 or later (python -c 'import "
                    "sqlite3; print(sqlite3.sqlite_version)'), or PostgreSQL (DATABASE_URL).",
                    obj=alias,
                    id="runs.E001",
                )
            )
    return errors
