"""The project's own health: Django's checks and migrations that match the models."""

import pytest
from django.core.management import call_command


def test_manage_py_check_is_clean():
    call_command("check", fail_level="WARNING")


@pytest.mark.django_db
def test_no_missing_migrations():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def _deploy_check(tmp_path, **variables):
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "LLM_KEY_HOSTS")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="coworkenv_web.settings",
        DEBUG="false",
        SECRET_KEY="a-long-production-secret-" + "x" * 40,
        ALLOWED_HOSTS="coworkenv.example.com",
        COWORKENV_VAR_DIR=str(tmp_path),
        **variables,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        capture_output=True,
        text=True,
    )


def test_deploy_check_passes_with_production_settings(tmp_path):
    result = _deploy_check(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_deploy_check_warns_when_keys_may_go_anywhere(tmp_path):
    result = _deploy_check(tmp_path, LLM_KEY_HOSTS="any")
    assert result.returncode == 1
    assert "(llm.W001) LLM_KEY_HOSTS=any: API keys may be sent to any origin" in result.stderr


def test_strict_env_bool_refuses_nonsense(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_bool

    monkeypatch.setenv("SOME_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="SOME_FLAG must be true or false"):
        env_bool("SOME_FLAG", False)


def test_env_secret_reads_file(monkeypatch, tmp_path):
    from coworkenv_web.env import env_secret

    secret_file = tmp_path / "key"
    secret_file.write_text("from-a-file\n")
    monkeypatch.setenv("MY_SECRET_FILE", str(secret_file))
    assert env_secret("MY_SECRET") == "from-a-file"


def test_the_api_module_loads_first_in_a_fresh_process(tmp_path):
    """A Celery worker's start-up checks can import apps.core.api before anything else has
    loaded DRF's views; DRF's views then import the parser named in the settings from that
    same module, which must not be a circle."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env["COWORKENV_VAR_DIR"] = str(tmp_path)
    code = (
        "import django; django.setup(); import apps.core.api; "
        "from django.core.checks import run_checks; run_checks()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.django_db
def test_a_sqlite_without_returning_is_named_by_the_database_check(monkeypatch):
    import sqlite3

    from django.core.checks import run_checks
    from django.db import connection

    from apps.runs import checks

    def database_errors():
        return [e for e in run_checks(databases=["default"]) if e.id == "runs.E001"]

    if connection.vendor != "sqlite":
        assert checks.sqlite_returning_check(None, databases=["default"]) == []
        return
    assert database_errors() == []
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.34.1")
    [error] = database_errors()
    assert "SQLite 3.34.1 has no UPDATE … RETURNING" in error.msg
    assert "3.35" in error.hint
