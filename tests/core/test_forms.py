"""The id fields of the pages' forms: a number past every id is an invalid choice (the form
shows the error), never a database error."""

import pytest

from apps.accounts.models import Project
from apps.core.forms import IdModelChoiceField, IdModelMultipleChoiceField

pytestmark = pytest.mark.django_db

HUGE = "99999999999999999999999"


@pytest.mark.parametrize("value", [HUGE, str(2**63), "-1", "abc", "1.5", "\u00b2"])
def test_multiple_choice_refuses_a_number_past_every_id(project, value):
    field = IdModelMultipleChoiceField(queryset=Project.objects.all(), required=False)
    with pytest.raises(Exception) as raised:
        field.clean([str(project.pk), value])
    assert raised.type.__name__ == "ValidationError"


@pytest.mark.parametrize("value", [HUGE, str(2**63), "-1", "abc"])
def test_single_choice_refuses_a_number_past_every_id(project, value):
    field = IdModelChoiceField(queryset=Project.objects.all(), required=False)
    with pytest.raises(Exception) as raised:
        field.clean(value)
    assert raised.type.__name__ == "ValidationError"


def test_real_ids_still_choose(project):
    field = IdModelMultipleChoiceField(queryset=Project.objects.all())
    assert list(field.clean([str(project.pk)])) == [project]
    assert IdModelChoiceField(queryset=Project.objects.all()).clean(str(project.pk)) == project
