"""Load an exported CoworkEnv task for the mock service and the grader (shipped in exports).

A task directory holds ``coworkenv_task.json`` (the environment document cut to this one
task, its records left out) and ``fixtures/<service>/<collection>.json`` (JSON arrays: the
task's initial records). The fixtures are authoritative: edit them and the mock service and
the grader both see the change. ``fixtures/media/`` holds the images the task's view tools
show (any file names: each is found by the sha256 of its bytes). ``coworkenv_engine``
(shipped next to this file) is CoworkEnv's environment engine; it needs ``jmespath`` and
``jsonschema``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from coworkenv_engine.attachments import Attachment, Resolver, directory_resolver
from coworkenv_engine.spec import EnvironmentSpec, parse_spec

TASK_FILE = "coworkenv_task.json"
FIXTURES = "fixtures"
MEDIA = "media"

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


def media_resolver(task_dir: str | Path) -> Resolver:
    """sha256 -> the bytes of the task's image of that hash (under ``fixtures/media``)."""
    return directory_resolver(str(Path(task_dir) / FIXTURES / MEDIA))


def view_answer(record, images: tuple[Attachment, ...], resolve: Resolver) -> tuple[int, dict]:
    """A view tool's (status, body): the record, and its images as Claw-Eval's media tools
    return theirs (``frames``: each ``image_b64`` with its ``mime_type``), the form its
    harness turns into image content for the model. A file missing from ``fixtures/media``
    is a ``not_found`` error naming it."""
    frames = []
    for index, attachment in enumerate(images):
        data = resolve(attachment.sha256)
        if data is None:
            message = f"the image '{attachment.name}' is not in {FIXTURES}/{MEDIA}"
            return 404, {"error": {"code": "not_found", "message": message}}
        frames.append(
            {
                "index": index,
                "name": attachment.name,
                "mime_type": attachment.media_type,
                "image_b64": base64.b64encode(data).decode("ascii"),
            }
        )
    names = ", ".join(f["name"] for f in frames)
    summary = f"{len(frames)} image(s): {names}"
    return 200, {"record": record, "frames": frames, "text_summary": summary}
