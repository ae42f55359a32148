"""Every integer a request can give is range-checked before it reaches a column (issue 10).

A survey, kept true by this test: each ``IntegerField`` of an input serializer (under
``apps/*/apis``) and of a form (``apps/*/forms``) declares both ``min_value`` and
``max_value``, so ``{"seed": 2147483648}`` is a 400 naming the field, not a database error.
Output serializers (``…Output``, ``…Page``, ``…Created``) only render and are not inputs;
floats are not surveyed (any finite float fits a ``double precision`` column); a model
form's fields are range-checked by the model's own validators in ``_post_clean``.
"""

import importlib
import inspect
import pkgutil

import pytest
from django import forms
from rest_framework import serializers

import apps


def _modules():
    for info in pkgutil.walk_packages(apps.__path__, "apps."):
        name = info.name
        if ".apis" in name or name.endswith(".forms"):
            yield importlib.import_module(name)


def _integer_inputs():
    found = []
    for module in _modules():
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            if issubclass(cls, serializers.Serializer):
                if cls_name.endswith(("Output", "Page", "Created")):
                    continue
                fields = dict(cls._declared_fields)
            elif issubclass(cls, forms.BaseModelForm):
                model_fields = {f.name for f in cls._meta.model._meta.get_fields()}
                fields = {k: v for k, v in cls.base_fields.items() if k not in model_fields}
            elif issubclass(cls, forms.BaseForm):
                fields = dict(cls.base_fields)
            else:
                continue
            for field_name, field in fields.items():
                child = getattr(field, "child", None)
                for candidate in (field, child):
                    if isinstance(candidate, (forms.FloatField, forms.DecimalField)):
                        continue
                    if isinstance(candidate, (serializers.IntegerField, forms.IntegerField)):
                        found.append((f"{module.__name__}.{cls_name}.{field_name}", candidate))
    return found


INPUTS = _integer_inputs()


def test_the_survey_finds_the_inputs():
    names = {name for name, _ in INPUTS}
    assert "apps.datasets.apis.VersionInput.seed" in names
    assert "apps.datasets.forms.VersionForm.seed" in names
    assert "apps.runs.apis.RunBatchInput.seed" in names
    assert "apps.environments.apis.serializers.RecordCreateInput.task" in names


@pytest.mark.parametrize(("name", "field"), INPUTS, ids=[name for name, _ in INPUTS])
def test_every_integer_input_is_bounded(name, field):
    assert field.min_value is not None, f"{name} has no min_value"
    assert field.max_value is not None, f"{name} has no max_value"
    assert field.max_value <= 2**63 - 1
