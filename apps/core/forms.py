"""Form fields shared by the apps' pages.

Django's model choice fields hand a posted id to the database as it is: a number past the
64-bit id column (``99999999999999999999999``) makes SQLite raise ``OverflowError`` and
PostgreSQL a ``DataError`` in the ``__in`` lookup of a multiple choice, a server error. These
refuse anything that is not an id (``apps.core.safeinput.parse_id``) as an invalid choice
before the query, with Django's own messages.
"""

from django import forms
from django.core.exceptions import ValidationError

from apps.core.safeinput import parse_id


class IdModelChoiceField(forms.ModelChoiceField):
    def to_python(self, value):
        if value in self.empty_values:
            return None
        if (
            self.to_field_name is None
            and not isinstance(value, self.queryset.model)
            and parse_id(value) is None
        ):
            raise ValidationError(
                self.error_messages["invalid_choice"],
                code="invalid_choice",
                params={"value": value},
            )
        return super().to_python(value)


class IdModelMultipleChoiceField(forms.ModelMultipleChoiceField):
    def _check_values(self, value):
        if self.to_field_name is None:
            for pk in value:
                if parse_id(pk) is None:
                    raise ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": pk},
                    )
        return super()._check_values(value)
