"""The real settings imported in a fresh process with its own environment: how the settings
tests check what a variable does, and that a bad value refuses to start."""

import os
import subprocess
import sys


def settings_in_fresh_process(tmp_path, prefix: str, code: str, **variables):
    """``python -c code`` (after ``django.setup()``) with the environment of this process less
    every ``prefix*`` variable, plus ``variables``; ``COWORKENV_VAR_DIR`` is ``tmp_path``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(prefix) and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env.update(
        DJANGO_SETTINGS_MODULE="coworkenv_web.settings",
        COWORKENV_VAR_DIR=str(tmp_path),
        **variables,
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def assert_refuses_to_start(result, message: str) -> None:
    """The process exited with the settings' ``ImproperlyConfigured`` ``message``."""
    assert result.returncode != 0
    assert f"django.core.exceptions.ImproperlyConfigured: {message}" in result.stderr
