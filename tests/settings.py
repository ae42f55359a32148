"""Test settings: the real settings, with only what tests need changed."""

import os
from pathlib import Path

# Each test run gets its own folder for the SQLite test database and the filesystem broker,
# so two runs at once (two terminals, two engineers) never share a database or a queue.
# A worker process started by a test inherits the folder through COWORKENV_VAR_DIR.
_TEST_VAR = Path(__file__).resolve().parent.parent / "var" / "test" / f"run-{os.getpid()}"
os.environ.setdefault("COWORKENV_VAR_DIR", str(_TEST_VAR))

from coworkenv_web.settings import *  # noqa: E402,F403
from coworkenv_web.settings import DATABASES, VAR_DIR  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory, so that a real worker process can open the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}

# The loopback LLM server the tests start listens on 127.0.0.1; nothing else non-public
# (::1, 10.x, 169.254.x) is allowed, so the tests see the server mode's address guard.
LLM_ALLOWED_NETWORKS = ["127.0.0.1/32"]

# API throttles far above what any test sends (the throttling tests lower them); the counters
# live in the cache, which tests/conftest.py clears around every test, as is django-axes's
# sign-in lockout state (database rows, rolled back with each test).
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {
        "user": "100000/min",
        "anon": "100000/min",
        "token_failure": "100000/min",
    },
}

# Worker tests read the worker's log for each task's retries ("retry: ... OperationalError"),
# which Celery logs at INFO; the real settings keep those lines quiet by default.
LOGGING["loggers"]["celery.app.trace"]["level"] = "INFO"  # noqa: F405
LOGGING["loggers"]["celery.worker.strategy"]["level"] = "INFO"  # noqa: F405
