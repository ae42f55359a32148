"""environment_validation_record: store a verdict computed elsewhere, for the right spec."""

import pytest

from apps.environments.models import EnvironmentStatus, ValidationReport
from apps.environments.services import environment_validation_record
from apps.environments.specs import environment_spec
from coworkenv_engine.validation import validate_spec

pytestmark = pytest.mark.django_db


def test_records_the_verdict_and_sets_the_status(environment):
    result = validate_spec(environment_spec(environment)).to_dict()
    report = environment_validation_record(environment=environment, result=result)
    environment.refresh_from_db()
    assert environment.latest_validation == report
    assert environment.status == (
        EnvironmentStatus.VALID if result["valid"] else EnvironmentStatus.INVALID
    )
    assert (report.revision, report.spec_hash) == (environment.revision, environment.spec_hash)
    assert report.problems == result["problems"]


def test_refuses_a_verdict_about_another_spec(environment):
    with pytest.raises(ValueError, match="not for environment"):
        environment_validation_record(
            environment=environment, result={"valid": True, "spec_hash": "0" * 64}
        )
    assert ValidationReport.objects.count() == 0
