"""The engine as its own distribution: ``pip install ./engine`` into a fresh virtual
environment (no Django, no project on the path) gives a working engine, its command line and
its own tests. pip takes jsonschema, jmespath and setuptools from the package index (or its
cache), as any user's install does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("engine-dist") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(ROOT / "engine"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}}
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )


def test_the_distribution_needs_nothing_of_the_web_app(fresh_venv, tmp_path):
    probe = _run(
        fresh_venv,
        "python",
        "-c",
        "import importlib.util as u, coworkenv_engine.validation, coworkenv_engine.runner;"
        "print(u.find_spec('django') is None, u.find_spec('apps') is None,"
        " coworkenv_engine.__file__)",
        cwd=tmp_path,
    )
    assert probe.returncode == 0, probe.stderr
    django_absent, project_absent, location = probe.stdout.split()
    assert (django_absent, project_absent) == ("True", "True")
    assert location.startswith(str(fresh_venv))  # the installed copy, not the checkout


def test_its_command_line_validates_a_sample(fresh_venv, tmp_path):
    result = _run(
        fresh_venv,
        "coworkenv-env",
        "validate",
        str(ROOT / "samples" / "acme-ops.json"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_its_own_tests_pass_in_the_fresh_environment(fresh_venv, tmp_path):
    result = _run(
        fresh_venv,
        "python",
        "-m",
        "unittest",
        "discover",
        "-s",
        str(ROOT / "engine" / "tests"),
        "-t",
        str(ROOT / "engine" / "tests"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stderr.splitlines()[-1]
