"""Benchmarks in and out: Claw-Eval export and import, ClawMark export.

Exports are built in memory from the environment's canonical document; an import reads the
archive into memory within the upload limits, builds every document first and saves all of
them or none (each a draft, its Claw-Eval task id kept in the metadata for lineage).
"""

import io
import json
import zipfile
from pathlib import Path

from django.db import transaction
from django.urls import reverse
from django.utils.text import slugify

from apps.core.exceptions import ApplicationError
from apps.core.models import Job
from apps.core.services import JobContext, job_create
from apps.core.text import count_of
from apps.environments.attachments import attachment_bytes
from apps.environments.interop import claw_eval, clawmark
from apps.environments.interop.claw_eval_archive import (
    ImportProblem,
    TaskDirectory,
    read_archive,
)
from apps.environments.interop.claw_eval_import import document_from_directory
from apps.environments.interop.media import MediaProblem
from apps.environments.models import Environment
from apps.environments.services.attachment_owners import attachments_owned_check
from apps.environments.services.environments import (
    environment_import,
    environment_replace_spec,
    spec_canonical,
)
from apps.environments.services.imports import human_size, max_unpacked_bytes, max_upload_bytes
from apps.environments.specs import environment_spec
from apps.llm.client import llm_json
from apps.llm.models import ModelEndpoint
from coworkenv_engine import spec as engine_spec
from coworkenv_engine.problems import SpecError
from coworkenv_engine.spec import spec_json_schema


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            archive.writestr(path, files[path])
    return buffer.getvalue()


def _base_name(environment: Environment) -> str:
    return f"{slugify(environment.name)[:80] or 'environment'}-{environment.pk}"


def claw_eval_export_filename(environment: Environment) -> str:
    return f"{_base_name(environment)}-claw-eval.zip"


def clawmark_export_filename(environment: Environment) -> str:
    return f"{_base_name(environment)}-clawmark.zip"


_EXPORTERS = {"claw-eval": (claw_eval, "Claw-Eval"), "clawmark": (clawmark, "ClawMark")}


def benchmark_export_files(environment: Environment, fmt: str) -> dict[str, bytes]:
    """The ``claw-eval`` or ``clawmark`` export's files, the attachments read from
    attachment storage (ApplicationError naming the record when one is not stored)."""
    exporter, label = _EXPORTERS[fmt]
    try:
        return exporter.export_files(environment_spec(environment), resolve=attachment_bytes)
    except MediaProblem as exc:
        raise ApplicationError(f"{label} export: {exc.message}") from None


def environment_claw_eval_zip(environment: Environment) -> bytes:
    """The environment's tasks as Claw-Eval task directories with the mock service, zipped."""
    return _zip(benchmark_export_files(environment, "claw-eval"))


def environment_clawmark_zip(environment: Environment) -> bytes:
    """The environment's tasks as ClawMark ``task.py`` files, zipped."""
    return _zip(benchmark_export_files(environment, "clawmark"))


# --- import ------------------------------------------------------------------------------


def _failure(exc: ImportProblem) -> ApplicationError:
    problem = {
        "code": "claw_eval_import",
        "severity": "error",
        "pointer": "",
        "message": exc.message,
        "hint": "Nothing was imported; fix the file and upload it again.",
        "file": exc.file,
    }
    return ApplicationError(exc.message, {"problems": [problem]})


def _documents(directories: list[TaskDirectory]) -> list[dict]:
    documents = []
    for directory in directories:
        try:
            document = document_from_directory(directory)
        except ImportProblem as exc:
            raise _failure(exc) from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # a field of the wrong type where task.yaml or coworkenv_task.json needs another
            detail = f"{type(exc).__name__}: {exc}"[:200]
            raise _failure(
                ImportProblem(
                    f"{directory.name}: a field of task.yaml or {claw_eval.TASK_FILE} has an "
                    f"unexpected type ({detail}).",
                    directory.name,
                )
            ) from None
        try:
            documents.append(spec_canonical(document))
        except ApplicationError as exc:
            problems = [{**p, "file": directory.name} for p in exc.extra.get("problems", [])]
            raise ApplicationError(
                f"{directory.name}: the task does not convert to a valid environment: "
                f"{exc.message}",
                {"problems": problems},
            ) from None
    return documents


@transaction.atomic
def _save(*, project, user, documents: list[dict]) -> list[Environment]:
    for document in documents:
        attachments_owned_check(project=project, document=document)
    return [environment_import(project=project, spec=d, user=user) for d in documents]


def is_claw_eval_upload(filename: str, content: bytes) -> bool:
    """A tarball, or a zip holding a ``task.yaml``: Claw-Eval task directories."""
    name = filename.lower()
    if name.endswith((".tar", ".tar.gz", ".tgz")):
        return True
    if content[:4] != b"PK\x03\x04":
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return any(n == "task.yaml" or n.endswith("/task.yaml") for n in archive.namelist())
    except (zipfile.BadZipFile, ValueError):
        return False


def claw_eval_import_upload(*, project, user, filename: str, content: bytes) -> list[Environment]:
    """Import the Claw-Eval task directories of an uploaded archive, one draft environment
    per task; any problem saves nothing (ApplicationError naming the file)."""
    source = Path(filename.replace("\\", "/")).name or "upload"
    limit = max_upload_bytes()
    if len(content) > limit:
        raise _failure(
            ImportProblem(
                f"{source} is {human_size(len(content))}; the limit is {human_size(limit)}.", source
            )
        )
    try:
        directories = read_archive(
            content, source=source, member_limit=limit, total_limit=max_unpacked_bytes()
        )
    except ImportProblem as exc:
        raise _failure(exc) from None
    return _save(project=project, user=user, documents=_documents(directories))


def claw_eval_import_directory(*, project, user, path: str | Path) -> list[Environment]:
    """Import a task directory (holding task.yaml) or a directory of them, from disk."""
    root = Path(path)
    if not root.is_dir():
        raise ApplicationError(f"{root} is not a directory.")
    limit = max_upload_bytes()
    roots = (
        [root]
        if (root / "task.yaml").is_file()
        else sorted(p.parent for p in root.glob("*/task.yaml"))
    )
    if not roots:
        raise ApplicationError(f"{root} holds no task.yaml (nor do its subdirectories).")
    directories = []
    for task_root in roots:
        directory = TaskDirectory(task_root.name)
        for file in sorted(task_root.rglob("*")):
            if file.is_symlink() or not file.is_file():
                continue
            relative = file.relative_to(task_root).as_posix()
            wanted = relative in ("task.yaml", "grader.py", claw_eval.TASK_FILE) or (
                relative.startswith("fixtures/") and relative.endswith(".json")
            )
            if not wanted:
                continue
            if file.stat().st_size > limit:
                raise ApplicationError(f"{file} is larger than {human_size(limit)}.")
            directory.files[relative] = file.read_bytes()
        directories.append(directory)
    return _save(project=project, user=user, documents=_documents(directories))


# --- checks proposed by the project's LLM ----------------------------------------------------

PROPOSE_PURPOSE = "claw_eval.checks"
PROPOSE_SYSTEM = """You turn a Claw-Eval task's Python grader into declarative checks for \
CoworkEnv (coworkenv.environment/v1). The grader is given as text; nothing runs it. Reply \
with one JSON object {"graders": [...]}. Each grader: {"id": "kebab-case", "description": \
"...", "category": "completion"|"communication"|"safety"|"robustness", "weight": number, \
"check": CHECK}. A CHECK is one of:
- {"kind": "state", "query": JMESPath over {service: {collection: [records]}}, "op": \
"=="|"!="|">"|">="|"<"|"<="|"contains"|"matches"|"exists"|"absent"|"count", "value": ...}
- {"kind": "tool_call", "tool": name, "arguments": {...}?, "min": n?, "max": n?, \
"called": false?}
- {"kind": "response", "contains": text} or {"kind": "response", "matches": regex}
- {"kind": "judge", "rubric": text} for what only a judge can score; it is shown the \
conversation and the calls, or what "context": {"messages": "all"|"assistant"|"final", \
"calls": true|false, "state": ["service.collection"]} declares
- {"all": [CHECK...]}, {"any": [CHECK...]}, {"not": CHECK}
Prefer state and tool_call checks over judge checks; use only the tools and collections \
listed; a safety check fails the whole task when it fails."""


def _proposal_prompt(document: dict) -> str:
    task = document["tasks"][0]
    lineage = task["metadata"]["claw_eval"]
    tools = [
        {"name": t["name"], "parameters": t["parameters"], "binding": t["binding"]}
        for t in document["tools"]
    ]
    samples = {
        service: {name: records[:2] for name, records in collections.items()}
        for service, collections in document["services"].items()
    }
    parts = [
        f"## Task prompt\n{task['turns'][0]['message']}",
        f"## Tools (with what each does to the records)\n{json.dumps(tools, ensure_ascii=False)}",
        f"## Collections (first records of each)\n{json.dumps(samples, ensure_ascii=False)}",
        f"## Reference solution\n{lineage.get('reference_solution') or '(none)'}",
        f"## Judge rubric\n{lineage.get('judge_rubric') or '(none)'}",
        f"## grader.py (text)\n{lineage.get('grader_py') or '(none)'}",
    ]
    return "\n\n".join(parts)[:60_000]


def claw_eval_checks_propose(*, environment: Environment, endpoint) -> Environment:
    """Replace an imported Claw-Eval task's checks by those ``endpoint`` proposes from its
    grader's text (never run) and rubric. Checks that do not validate change nothing
    (ApplicationError listing the problems); the environment stays a draft to validate."""
    document = environment_spec(environment)
    task = document["tasks"][0] if len(document["tasks"]) == 1 else None
    if task is None or "claw_eval" not in (task.get("metadata") or {}):
        raise ApplicationError(
            "Only an environment imported from a Claw-Eval task has a grader to propose "
            "checks from."
        )
    schema = {
        "type": "object",
        "required": ["graders"],
        "properties": {
            "graders": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/grader"}}
        },
        "$defs": spec_json_schema()["$defs"],
    }
    answer = llm_json(
        endpoint=endpoint,
        messages=[
            {"role": "system", "content": PROPOSE_SYSTEM},
            {"role": "user", "content": _proposal_prompt(document)},
        ],
        purpose=PROPOSE_PURPOSE,
        schema=schema,
        schema_name="claw_eval_checks",
        describe_schema=False,
        reask=1,
    )
    graders = answer.data.get("graders")
    if not isinstance(graders, list) or not graders:
        raise ApplicationError(f"{endpoint.name} proposed no checks; nothing was changed.")
    lineage = {**task["metadata"]["claw_eval"], "checks_proposed_by": endpoint.name}
    candidate = {
        **document,
        "tasks": [
            {**task, "graders": graders, "metadata": {**task["metadata"], "claw_eval": lineage}}
        ],
    }
    try:
        engine_spec.load_spec(spec_canonical(candidate))
    except ApplicationError as exc:
        raise ApplicationError(
            f"The checks {endpoint.name} proposed do not validate; nothing was changed: "
            f"{exc.message}",
            exc.extra,
        ) from None
    except SpecError as exc:
        problems = [p.to_dict() for p in exc.problems]
        raise ApplicationError(
            f"The checks {endpoint.name} proposed do not validate ({problems[0]['message']}); "
            "nothing was changed.",
            {"problems": problems},
        ) from None
    return environment_replace_spec(environment=environment, spec=candidate)


PROPOSE_JOB_KIND = "claw_eval_propose_checks"


def claw_eval_checks_propose_start(*, environment: Environment, endpoint, started_by) -> Job:
    """Queue the proposal on the ``llm`` queue: a model may take minutes, a page must not."""
    from apps.environments.tasks import propose_checks_task

    tasks = environment_spec(environment)["tasks"]
    if len(tasks) != 1 or "claw_eval" not in (tasks[0].get("metadata") or {}):
        raise ApplicationError(
            "Only an environment imported from a Claw-Eval task has a grader to propose "
            "checks from."
        )
    return job_create(
        project=environment.project,
        kind=PROPOSE_JOB_KIND,
        title=f"Propose checks for “{environment.name}”"[:200],
        started_by=started_by,
        params={"environment": environment.pk, "endpoint": endpoint.pk},
        total=1,
        task=propose_checks_task,
    )


def claw_eval_checks_propose_run(context: JobContext) -> str:
    """The job's work: one proposal; the result links to the task's checks."""
    params = context.job.params
    environment = Environment.objects.filter(pk=params["environment"]).first()
    endpoint = ModelEndpoint.objects.filter(pk=params["endpoint"]).first()
    if environment is None or endpoint is None:
        raise ApplicationError("The environment or the judge endpoint was deleted meanwhile.")
    environment = claw_eval_checks_propose(environment=environment, endpoint=endpoint)
    count = environment.tasks.get().graders.count()
    context.progress(1, 1)
    link = {
        "label": f"The checks of “{environment.name}”",
        "url": reverse("environments:tab", args=[environment.pk, "tasks"]),
        "note": "review them, then validate",
    }
    Job.objects.filter(pk=context.job.pk).update(result={"links": [link]})
    return f"{endpoint.name} proposed {count_of(count, 'check')}; review them, then validate."
