"""The verifiers adapter against the real ``verifiers`` package, inside the suite.

verifiers 0.4 pins ``openai<3`` and ``mcp==2.0.0``, which the app's venv cannot take, so
``test_verifiers_real.py`` skips there. This module builds a venv of its own (``pip install
./engine verifiers pytest``, no Django), caches it under ``var/cache/`` keyed on the Python
version, the requirement and the engine's declared dependencies (a rerun reuses it and only
reinstalls ``./engine``, so the checkout's engine is what runs), and runs
``test_verifiers_real.py`` there in a subprocess. It skips only when the package index cannot
be reached (the reason says so, with pip's last line); any other failure fails.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENT = "verifiers>=0.4,<0.5"
CACHE = ROOT / "var" / "cache"
UNREACHABLE = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectionError",
    "ReadTimeoutError",
)


def _clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV"}
    }


def _pip(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        check=False,
        env=_clean_env(),
        timeout=900,
    )


def _key() -> str:
    declared = (ROOT / "engine" / "pyproject.toml").read_text()
    version = ".".join(map(str, sys.version_info[:3]))
    return hashlib.sha256(f"{version}\n{REQUIREMENT}\n{declared}".encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def verifiers_venv() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / f"verifiers-venv-{_key()}"
    with open(CACHE / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others then reuse it
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            built = _pip(venv, "install", "--quiet", str(ROOT / "engine"), REQUIREMENT, "pytest")
            if built.returncode != 0:
                output = built.stdout + built.stderr
                shutil.rmtree(venv, ignore_errors=True)
                if any(marker in output for marker in UNREACHABLE):
                    last = [line for line in output.splitlines() if line.strip()][-1]
                    pytest.skip(f"the package index cannot be reached for {REQUIREMENT}: {last}")
                pytest.fail(f"pip install ./engine {REQUIREMENT} failed:\n{output[-4000:]}")
            (venv / ".complete").write_text(REQUIREMENT + "\n")
        # the checkout's engine, whatever the cached venv was built from
        fresh = _pip(
            venv, "install", "--quiet", "--no-deps", "--force-reinstall", str(ROOT / "engine")
        )
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    return venv


def test_the_adapter_passes_its_checks_against_the_real_verifiers(verifiers_venv, tmp_path):
    probe = subprocess.run(
        [
            str(verifiers_venv / "bin" / "python"),
            "-c",
            "import importlib.util as u, importlib.metadata as m, coworkenv_engine as e;"
            "print(u.find_spec('django') is None, m.version('verifiers'), e.__file__)",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=_clean_env(),
    )
    assert probe.returncode == 0, probe.stderr
    no_django, version, location = probe.stdout.split()
    assert no_django == "True" and version.startswith("0.4")
    assert location.startswith(str(verifiers_venv))  # the installed engine, not the checkout
    result = subprocess.run(
        [
            str(verifiers_venv / "bin" / "python"),
            "-m",
            "pytest",
            "--noconftest",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-q",
            "-rs",
            str(ROOT / "tests" / "engine" / "test_verifiers_real.py"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**_clean_env(), "PYTHONPATH": str(ROOT)},  # `tests` (helpers), not the engine
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = output.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, output
