"""Load an exported CoworkEnv task for the mock service and the grader (shipped in exports).

A task directory holds ``coworkenv_task.json`` (the environment document cut to this one
task, its records left out) and ``fixtures/<service>/<collection>.json`` (JSON arrays: the
task's initial records). The fixtures are authoritative: edit them and the mock service and
the grader both see the change. ``coworkenv_engine`` (shipped next to this file) is
CoworkEnv's environment engine; it needs ``jmespath`` and ``jsonschema``.
"""

from __future__ import annotations

import json
from pathlib import Path

from coworkenv_engine.spec import EnvironmentSpec, parse_spec

TASK_FILE = "coworkenv_task.json"
FIXTURES = "fixtures"

# The engine's error codes as HTTP statuses: transient faults as the status a real service
# gives (the harness counts any status >= 400 as a tool error), the rest as client errors.
STATUS_BY_CODE = {
    "rate_limit": 429,
    "server_error": 500,
    "timeout": 504,
    "not_found": 404,
    "conflict": 409,
    "unknown_tool": 404,
    "state_limit": 507,
    "call_limit": 429,
}


def http_status(error_code: str | None) -> int:
    return 200 if error_code is None else STATUS_BY_CODE.get(error_code, 400)


def load_document(task_dir: str | Path) -> dict:
    """The task's environment document with its fixtures as the services' records."""
    task_dir = Path(task_dir)
    doc = json.loads((task_dir / TASK_FILE).read_text(encoding="utf-8"))
    services = {}
    for service, collections in doc["services"].items():
        services[service] = {}
        for name in collections:
            path = task_dir / FIXTURES / service / f"{name}.json"
            records = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
            if not isinstance(records, list):
                raise ValueError(f"{path}: expected a JSON array of records")
            services[service][name] = records
    doc["services"] = services
    for task in doc["tasks"]:
        task["records"] = {}
    return doc


def load_task(task_dir: str | Path) -> tuple[EnvironmentSpec, str]:
    """The typed spec and the key of its one task."""
    doc = load_document(task_dir)
    return parse_spec(doc), doc["tasks"][0]["key"]
