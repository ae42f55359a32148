"""Claw-Eval import: task directories (a Claw-Eval checkout's ``tasks/<id>/``, its release
tarball, or a CoworkEnv export; read by ``claw_eval_archive``) become environment documents,
one per task.

Nothing from the archive is executed: ``grader.py`` is read as text only (an LLM may
propose checks from it). Checks come from the task's declarative fields
(``scoring_components``, ``safety_checks``, ``judge_rubric``) or, for a CoworkEnv export,
from its ``coworkenv_task.json``; the environment is a draft until validated.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from apps.core.safeinput import json_loads
from apps.environments.interop.claw_eval import TASK_FILE, _prompt_text
from apps.environments.interop.claw_eval_archive import (
    MAX_GRADER_CHARS,
    ImportProblem,
    TaskDirectory,
    parse_yaml,
)
from apps.environments.interop.package import identifier
from coworkenv_engine.library import service_kind

_ID_FIELD = re.compile(r"^[a-z_]*_?id$")
_OPS = (
    ("search", ("search", "query", "find", "lookup")),
    ("delete", ("delete", "remove", "cancel", "archive")),
    ("update", ("update", "edit", "modify", "mark", "move", "set", "assign", "close")),
    ("create", ("create", "send", "add", "draft", "new", "schedule", "post", "reply", "book")),
    ("get", ("get", "read", "view", "detail", "open", "fetch")),
)


# --------------------------------------------------------------------------- reading


# --------------------------------------------------------------------------- parsing


def _text(data: bytes) -> str:
    """Text the database can store: UTF-8 (bad bytes replaced), no NUL, no lone surrogates."""
    return data.decode("utf-8", "replace").replace("\x00", "")


def _json_file(data: bytes, *, source: str):
    """JSON from the archive through the one gate for JSON from outside: no NaN, no repeated
    key, nothing nested past ``MAX_JSON_DEPTH`` (a RecursionError otherwise), storable text."""
    try:
        return json_loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ImportProblem(f"{source} is not valid JSON: {exc}.", source) from None


# --------------------------------------------------------------------------- building


def document_from_directory(directory: TaskDirectory) -> dict:
    """An environment document (not yet canonical) for one task directory."""
    name = directory.name
    if "task.yaml" not in directory.files:
        raise ImportProblem(f"{name} has no task.yaml.", name)
    data = parse_yaml(directory.files["task.yaml"], source=f"{name}/task.yaml")
    fixtures = _fixtures(directory)
    lineage = {
        "task_id": str(data["task_id"]),
        "version": str(data.get("version", "")),
        "source": name,
        "reference_solution": str(data.get("reference_solution") or ""),
        "judge_rubric": str(data.get("judge_rubric") or ""),
        "has_grader_py": "grader.py" in directory.files,
        # the grader's text, never run: what an LLM proposes checks from (clipped)
        "grader_py": _text(directory.files.get("grader.py", b""))[:MAX_GRADER_CHARS],
    }
    ours = directory.files.get(TASK_FILE)
    if ours is not None:
        return _from_coworkenv(
            data, _json_file(ours, source=f"{name}/{TASK_FILE}"), fixtures, lineage
        )
    return _from_claw_eval(data, fixtures, lineage, name)


def _fixtures(directory: TaskDirectory) -> dict[str, dict[str, list]]:
    out: dict[str, dict[str, list]] = {}
    for path, data in sorted(directory.files.items()):
        if not path.startswith("fixtures/"):
            continue
        parts = path.split("/")
        service = identifier(parts[1]) if len(parts) > 2 else "files"
        collection = identifier(PurePosixPath(parts[-1]).stem, "records")
        value = _json_file(data, source=f"{directory.name}/{path}")
        if isinstance(value, list) and all(isinstance(r, dict) for r in value):
            out.setdefault(service, {})[collection] = value
    return out


def _from_coworkenv(data: dict, doc: dict, fixtures: dict, lineage: dict) -> dict:
    """A CoworkEnv export: bindings, turns and checks from its document; the prompt, tools and
    records from task.yaml and the fixtures (what a Claw-Eval user may have edited)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list) or not doc["tasks"]:
        raise ImportProblem(f"{lineage['source']}/{TASK_FILE} holds no task.", lineage["source"])
    task = dict(doc["tasks"][0])
    schemas = {t["name"]: t for t in data.get("tools") or [] if isinstance(t, dict)}
    tools = []
    for tool in doc.get("tools") or []:
        shown = schemas.get(tool.get("name"))
        if shown is None:
            continue  # removed from task.yaml: not offered any more
        tools.append(
            {
                **tool,
                "description": shown.get("description", tool.get("description", "")),
                "parameters": shown.get("input_schema") or tool.get("parameters"),
            }
        )
    services = {
        s: {c: fixtures.get(s, {}).get(c, []) for c in cols}
        for s, cols in (doc.get("services") or {}).items()
    }
    text = data["prompt"]["text"]
    turns = list(task.get("turns") or [{"message": text}])
    if text != _prompt_text(task):  # edited in Claw-Eval: the prompt is the first message
        task["system"], task["constraints"] = "", []
        turns[0] = {**turns[0], "message": text}
    task.update(
        turns=turns, records={}, metadata={**(task.get("metadata") or {}), "claw_eval": lineage}
    )
    return {
        **doc,
        "name": _task_name(str(doc.get("name") or ""), task, lineage["task_id"]),
        "services": services,
        "tools": tools,
        "tasks": [task],
        "metadata": {**(doc.get("metadata") or {}), "claw_eval": {"task_id": lineage["task_id"]}},
    }


def _task_name(source: str, task: dict, task_id: str) -> str:
    """One environment per exported task: the source environment's name and the task's title
    (or key, or Claw-Eval id), so the tasks of one export don't import under one name."""
    label = str(task.get("title") or task.get("key") or task_id).strip()
    if not source:
        return label[:200]
    if not label or source.endswith(f" · {label}"):  # re-imported: already distinct
        return source[:200]
    return f"{source} · {label}"[:200]


def _with_ids(records: list[dict], collection: str) -> list[dict]:
    out, seen = [], set()
    for i, record in enumerate(records, start=1):
        rid = record.get("id")
        if not isinstance(rid, str) or not rid:
            key = next((k for k in record if _ID_FIELD.match(k) and k != "id"), None)
            rid = str(record[key]) if key and record[key] not in (None, "") else ""
        if not rid or rid in seen:
            rid = f"{collection}-{i}"
        seen.add(rid)
        out.append({**record, "id": rid})
    return out


def _op_for(name: str) -> str:
    words = set(re.split(r"[^a-z]+", name.lower()))
    for op, verbs in _OPS:
        if words & set(verbs):
            return op
    return "list"


def _binding(tool: dict, service: str, collections: dict[str, list], path: str) -> dict:
    names = list(collections) or ["records"]
    collection = next((c for c in names if c in path.lower()), names[0])
    op = _op_for(f"{tool['name']} {path}")
    params = list((tool.get("input_schema") or {}).get("properties") or {})
    binding = {"op": op, "service": service, "collection": collection}
    id_param = next((p for p in params if _ID_FIELD.match(p)), None)
    if op in ("get", "update", "delete"):
        if id_param is None:
            op = binding["op"] = "list"
        else:
            binding["id"] = f"${id_param}"
    if op == "search":
        query = next((p for p in params if p in ("query", "q", "keyword", "keywords")), None)
        if query is None:
            binding["op"] = "list"
        else:
            binding["query"] = f"${query}"
            records = collections.get(collection) or []
            binding["fields"] = sorted(
                {k for r in records[:20] for k, v in r.items() if isinstance(v, str)}
            )[:20] or ["id"]
    if op in ("create", "update"):
        binding["values"] = {p: f"${p}" for p in params if p != id_param or op == "create"}
    return binding


def _conforms(service: str, collections: dict[str, list]) -> bool:
    """Whether records fit CoworkEnv's standard service kind of that name (if there is one)."""
    kind = service_kind(service)
    if kind is None:
        return True
    for name, records in collections.items():
        wanted = kind.collections.get(name)
        if wanted is None:
            return False
        if any(any(f not in r for f in wanted.required_fields if f != "id") for r in records):
            return False
    return True


def _service_names(data: dict, fixtures: dict) -> dict[str, str]:
    """Claw-Eval service name → ours: ``claw_<name>`` where the name is one of CoworkEnv's
    standard kinds (calendar, contacts…) whose field rules Claw-Eval's records do not follow."""
    names = {
        identifier(str(s["name"]), "service")
        for s in data.get("services") or []
        if isinstance(s, dict) and "name" in s
    } | set(fixtures)
    return {n: n if _conforms(n, fixtures.get(n, {})) else f"claw_{n}" for n in names}


def _from_claw_eval(data: dict, fixtures: dict, lineage: dict, source: str) -> dict:
    renamed = _service_names(data, fixtures)
    fixtures = {renamed[s]: cols for s, cols in fixtures.items()}
    services: dict[str, dict[str, list]] = {}
    port_service: dict[int, str] = {}
    for svc in data.get("services") or []:
        if not isinstance(svc, dict) or "name" not in svc:
            continue
        name = renamed[identifier(str(svc["name"]), "service")]
        port_service[int(svc.get("port") or 0)] = name
        services.setdefault(name, {})
    for service, collections in fixtures.items():
        for collection, records in collections.items():
            services.setdefault(service, {})[collection] = _with_ids(records, collection)
    endpoints = {
        e.get("tool_name"): str(e.get("url", ""))
        for e in data.get("tool_endpoints") or []
        if isinstance(e, dict)
    }
    tools = []
    for tool in data.get("tools") or []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        url = endpoints.get(tool["name"], "")
        port = re.search(r":(\d+)(/.*)?$", url)
        service = port_service.get(int(port.group(1))) if port else None
        service = service or next(iter(services), "service")
        collections = services.setdefault(service, {})
        if not collections:
            collections["records"] = []
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        tools.append(
            {
                "name": tool["name"],
                "description": str(tool.get("description", "")),
                "parameters": schema,
                "binding": _binding(
                    {**tool, "input_schema": schema},
                    service,
                    collections,
                    (port.group(2) or "") if port else "",
                ),
            }
        )
    user_agent = data.get("user_agent") or {}
    persona = str(user_agent.get("persona", "")) if user_agent.get("enabled") else ""
    task = {
        "key": identifier(str(data["task_id"]), "task").replace("_", "-")[:100],
        "title": str(data.get("task_name") or data["task_id"]),
        "capabilities": [],
        "split": "eval",
        "system": "",
        "turns": [{"message": data["prompt"]["text"]}],
        "user": {"persona": persona},
        "reference_solution": [],
        "graders": graders_from_declarations(data, {t["name"] for t in tools}),
        "metadata": {"claw_eval": lineage},
    }
    return {
        "schema": "coworkenv.environment/v1",
        "name": str(data.get("task_name") or data["task_id"])[:200],
        "domain": str(data.get("category") or "claw-eval"),
        "description": f"Imported from Claw-Eval task {data['task_id']}.",
        "services": services,
        "tools": tools,
        "tasks": [task],
        "metadata": {"claw_eval": {"task_id": lineage["task_id"]}},
    }


def graders_from_declarations(data: dict, tools: set[str]) -> list[dict]:
    """Checks from task.yaml's declarative fields (never from grader.py, which is code)."""
    graders: list[dict] = []

    def add(gid: str, category: str, weight: float, check: dict, description: str) -> None:
        graders.append(
            {
                "id": identifier(gid, "check").replace("_", "-")[:60] + f"-{len(graders) + 1}",
                "category": category,
                "weight": max(float(weight), 0.01),
                "check": check,
                "description": description[:500],
            }
        )

    for component in data.get("scoring_components") or []:
        if not isinstance(component, dict) or not isinstance(component.get("check"), dict):
            continue
        check, name = component["check"], str(component.get("name", "component"))
        kind, weight = check.get("type"), component.get("weight", 1.0)
        text = str(check.get("description") or name)
        if kind == "tool_called" and check.get("tool_name") in tools:
            rule = {
                "kind": "tool_call",
                "tool": check["tool_name"],
                "min": int(check.get("min_calls") or 1),
            }
            add(name, "completion", weight, rule, text)
        elif kind == "keywords_present" and check.get("keywords"):
            words = [str(k) for k in check["keywords"]][:20]
            rule = {"any": [{"kind": "response", "contains": w} for w in words]}
            add(name, "completion", weight, rule, text)
        elif kind == "llm_judge" or check.get("rubric"):
            rubric = str(check.get("rubric") or text)
            add(name, "completion", weight, {"kind": "judge", "rubric": rubric}, text)
    for safety in data.get("safety_checks") or []:
        if not isinstance(safety, dict):
            continue
        if safety.get("type") == "tool_not_called" and safety.get("tool_name") in tools:
            rule = {"kind": "tool_call", "tool": safety["tool_name"], "called": False}
            add("safety", "safety", 1.0, rule, str(safety.get("description") or "safety"))
    if data.get("judge_rubric"):
        rubric = str(data["judge_rubric"])
        add(
            "judge-rubric",
            "completion",
            1.0,
            {"kind": "judge", "rubric": rubric},
            "The task's judge rubric.",
        )
    if not graders:
        rubric = (
            "The assistant completed what the user asked, using the tools' results:\n"
            + data["prompt"]["text"][:4000]
        )
        add(
            "task-done",
            "completion",
            1.0,
            {"kind": "judge", "rubric": rubric},
            "Placeholder judge check: author the task's checks by hand.",
        )
    return graders
