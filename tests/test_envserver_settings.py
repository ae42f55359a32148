"""The environment server settings (ENVSERVER_*): strict numbers read from the environment, a
clear start-up error naming the variable otherwise. Each case imports the real settings in a
fresh process with its own environment."""

import json

import pytest

from tests.fresh_settings import assert_refuses_to_start, settings_in_fresh_process

PRINT = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps([settings.ENVSERVER_MAX_SESSIONS, settings.ENVSERVER_IDLE_TIMEOUT_S, "
    "settings.ENVSERVER_MAX_LIFETIME_S, settings.ENVSERVER_REFRESH_S]))"
)


def _settings(tmp_path, **variables):
    return settings_in_fresh_process(tmp_path, "ENVSERVER_", PRINT, **variables)


def test_defaults_and_values_from_the_environment(tmp_path):
    result = _settings(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [256, 600.0, 3600.0, 60.0]
    result = _settings(
        tmp_path,
        ENVSERVER_MAX_SESSIONS="1000",
        ENVSERVER_IDLE_TIMEOUT_S="30",
        ENVSERVER_MAX_LIFETIME_S="7200.5",
        ENVSERVER_REFRESH_S="0",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [1000, 30.0, 7200.5, 0.0]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ENVSERVER_MAX_SESSIONS", "many", "must be an integer, not 'many'."),
        ("ENVSERVER_MAX_SESSIONS", "0", "must be at least 1, not 0."),
        ("ENVSERVER_IDLE_TIMEOUT_S", "10m", "must be a number, not '10m'."),
        ("ENVSERVER_IDLE_TIMEOUT_S", "-1", "must be positive, not -1.0."),
        ("ENVSERVER_MAX_LIFETIME_S", "inf", "must be a finite number, not 'inf'."),
        ("ENVSERVER_MAX_LIFETIME_S", "0", "must be positive, not 0.0."),
        ("ENVSERVER_REFRESH_S", "nan", "must be a finite number, not 'nan'."),
        ("ENVSERVER_REFRESH_S", "-5", "must be at least 0, not -5.0."),
    ],
)
def test_a_bad_value_stops_start_up_with_its_name(tmp_path, name, value, message):
    result = _settings(tmp_path, **{name: value})
    assert_refuses_to_start(result, f"{name} {message}")
