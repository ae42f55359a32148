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


def test_env_choice_reads_one_of_the_choices(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_choice

    monkeypatch.delenv("SOME_ENGINE", raising=False)
    assert env_choice("SOME_ENGINE", "auto", ("auto", "vllm", "transformers")) == "auto"
    monkeypatch.setenv("SOME_ENGINE", "vllm")
    assert env_choice("SOME_ENGINE", "auto", ("auto", "vllm", "transformers")) == "vllm"
    monkeypatch.setenv("SOME_ENGINE", "VLLM")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_choice("SOME_ENGINE", "auto", ("auto", "vllm", "transformers"))
    assert str(refused.value) == (
        "SOME_ENGINE must be 'auto', 'vllm' or 'transformers', not 'VLLM'."
    )
    with pytest.raises(ImproperlyConfigured, match=r"^SOME_ENGINE must be 'auto', not 'VLLM'\.$"):
        env_choice("SOME_ENGINE", "auto", ("auto",))


@pytest.mark.parametrize(
    ("reader", "default", "value", "read", "expected"),
    [
        ("env_int", 60, None, {"minimum": 1}, 60),
        ("env_int", 60, "1", {"minimum": 1}, 1),
        ("env_int", 60, "0", {"minimum": 1}, "SOME_S must be at least 1, not 0."),
        ("env_int", 60, "0", {"minimum": 0}, 0),
        ("env_int", 60, "-3", {}, -3),
        ("env_float", 600.0, None, {"positive": True}, 600.0),
        ("env_float", 600.0, "0.5", {"positive": True}, 0.5),
        ("env_float", 600.0, "0", {"positive": True}, "SOME_S must be positive, not 0.0."),
        ("env_float", 600.0, "0", {"minimum": 0}, 0.0),
        ("env_float", 600.0, "-5", {"minimum": 0}, "SOME_S must be at least 0, not -5.0."),
        (
            "env_float",
            600.0,
            "inf",
            {"positive": True},
            "SOME_S must be a finite number, not 'inf'.",
        ),
    ],
)
def test_env_numbers_refuse_a_number_out_of_their_bounds(
    monkeypatch, reader, default, value, read, expected
):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web import env

    if value is not None:
        monkeypatch.setenv("SOME_S", value)
    if isinstance(expected, str):
        with pytest.raises(ImproperlyConfigured) as refused:
            getattr(env, reader)("SOME_S", default, **read)
        assert str(refused.value) == expected
    else:
        assert getattr(env, reader)("SOME_S", default, **read) == expected


SQLITE_OPTIONS = {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA x"}


def _database(monkeypatch, url):
    from coworkenv_web.env import env_database

    monkeypatch.delenv("SOME_DB_URL_FILE", raising=False)
    if url is None:
        monkeypatch.delenv("SOME_DB_URL", raising=False)
    else:
        monkeypatch.setenv("SOME_DB_URL", url)
    return env_database("SOME_DB_URL", sqlite_options=SQLITE_OPTIONS, conn_max_age=60)


def test_env_database_reads_a_postgres_url(monkeypatch):
    assert _database(monkeypatch, None) is None
    url = "postgres://cw:p%40ss@db.lan:5433/coworkenv?sslmode=require&connect_timeout=5"
    assert _database(monkeypatch, url) == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "coworkenv",
        "USER": "cw",
        "PASSWORD": "p@ss",
        "HOST": "db.lan",
        "PORT": "5433",
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {"sslmode": "require", "connect_timeout": "5"},
    }


def test_env_database_reads_a_sqlite_url_with_its_timeout(monkeypatch):
    assert _database(monkeypatch, "sqlite:///srv/cw/db.sqlite3?timeout=45") == {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "/srv/cw/db.sqlite3",
        "OPTIONS": {**SQLITE_OPTIONS, "timeout": 45.0},
    }
    assert _database(monkeypatch, "sqlite://") == {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        "OPTIONS": {**SQLITE_OPTIONS, "timeout": 20.0},
    }


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///db.sqlite3?timeout=soon", "SOME_DB_URL's ?timeout= must be seconds."),
        (
            "mysql://db.lan/cw",
            "SOME_DB_URL must start with postgres:// or sqlite://, not 'mysql'://.",
        ),
    ],
)
def test_env_database_refuses_a_url_it_cannot_read(monkeypatch, url, message):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured) as refused:
        _database(monkeypatch, url)
    assert str(refused.value) == message


def test_env_tokenizers_reads_names_and_paths(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_tokenizers

    monkeypatch.delenv("SOME_TOKENIZERS", raising=False)
    assert env_tokenizers("SOME_TOKENIZERS") == {}
    monkeypatch.setenv("SOME_TOKENIZERS", " qwen = /models/qwen ,llama=/m/tokenizer.json,")
    assert env_tokenizers("SOME_TOKENIZERS") == {
        "qwen": "/models/qwen",
        "llama": "/m/tokenizer.json",
    }
    monkeypatch.setenv("SOME_TOKENIZERS", "qwen=/models/qwen,/models/llama")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_tokenizers("SOME_TOKENIZERS")
    assert str(refused.value) == (
        "SOME_TOKENIZERS entries look like NAME=/path/to/tokenizer.json, not '/models/llama'."
    )


def test_env_addresses_keeps_addresses_and_networks_as_written(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_addresses

    monkeypatch.delenv("SOME_PROXIES", raising=False)
    assert env_addresses("SOME_PROXIES") == []
    monkeypatch.setenv("SOME_PROXIES", "10.0.0.0/8, 192.0.2.7,fd00::/8")
    assert env_addresses("SOME_PROXIES") == ["10.0.0.0/8", "192.0.2.7", "fd00::/8"]
    monkeypatch.setenv("SOME_PROXIES", "10.0.0.0/8,lb")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_addresses("SOME_PROXIES")
    assert str(refused.value) == ("SOME_PROXIES: 'lb' is not an address or a network (10.0.0.0/8).")


def test_env_secret_key_keeps_a_development_secret_or_refuses(monkeypatch, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    from coworkenv_web.env import env_secret_key

    monkeypatch.delenv("SOME_KEY_FILE", raising=False)
    monkeypatch.setenv("SOME_KEY", "from-the-environment")
    assert env_secret_key("SOME_KEY", None) == "from-the-environment"
    monkeypatch.delenv("SOME_KEY")
    kept = tmp_path / "var" / "dev-secret-key"
    generated = env_secret_key("SOME_KEY", kept)
    assert len(generated) >= 50
    assert env_secret_key("SOME_KEY", kept) == generated == kept.read_text()
    with pytest.raises(ImproperlyConfigured) as refused:
        env_secret_key("SOME_KEY", None)
    assert str(refused.value) == "SOME_KEY (or SOME_KEY_FILE) is required when DEBUG=false."


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
