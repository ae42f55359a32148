"""ClawMark export: each task as ``tasks/<domain_name>/task<N>/task.py`` (METADATA, PROMPT,
contiguous async ``stageK(ctx)`` functions, async checkers, RUBRIC).

Stage K is our turn K: stage 0 seeds the initial records, each stage applies its turn's
exogenous updates (loud ones announced in the notification, silent ones not) and returns
the turn's message with its time. Records live as JSON files in the agent's workspace
(``/workspace/coworkenv/<service>/<collection>.json``); ``email`` inbox messages,
``calendar`` events and ``files`` documents are also seeded into ClawMark's local services
and workspace. The images the task's view tools show ship as
``assets/attachments/<name>`` (stage 0 uploads ``assets/``, so the agent finds them under
``/workspace/attachments``), and ``AGENTS.md`` maps each ``"sha256:<hex>"`` record value to
its file. Each grader becomes one checker, in the stage of its ``at_turn`` (``final``
otherwise), evaluating our check with the engine over the evidence a ClawMark checker has,
its ``ctx`` (workspace snapshots per stage, service managers, the sandbox):

state         the records in the stage's snapshot
response      the reply the agent writes per stage to ``outputs/replies/stage<K>.md`` (the
              output contract: AGENTS.md and every notification ask for it), else its
              messages of that stage in OpenClaw's session log (through ``ctx.sandbox``)
side_effects  the agent's net changes, stage snapshot against the previous one with the
              stage's exogenous updates applied, against the reference footprint (exported)
all/any/not   of these

Not expressible, so exported as documented skips (``METADATA["coworkenv"]["skipped"]``, with
the reason, and a comment in the file), never silently dropped: ``tool_call`` (ClawMark's
agent works through a shell on the record files; no log of CoworkEnv tool calls exists) and
``judge`` (ClawMark checkers are deterministic; it runs no LLM judge).
"""

from __future__ import annotations

import json
import re

from apps.environments.interop.media import Media, task_media
from apps.environments.interop.package import (
    engine_files,
    identifier,
    in_comment,
    in_docstring,
    python_literal,
    shipped,
)
from coworkenv_engine.attachments import Resolver
from coworkenv_engine.checks import leaf_kinds
from coworkenv_engine.runner import reference_footprint
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import parse_spec

HELPER_DIR = "_coworkenv"
EXPORTED_KINDS = {"state", "response", "side_effects"}
SKIP_REASONS = {
    "tool_call": "ClawMark's agent works through a shell on the record files: there is no "
    "log of CoworkEnv tool calls for a checker to read (OpenClaw's session log holds shell "
    "commands, not tool calls with their arguments)",
    "judge": "ClawMark checkers are deterministic functions: ClawMark runs no LLM judge",
}


def domain_of(document: dict) -> str:
    """The export's folder under ``tasks/``: the environment's domain and name, so two
    environments of one domain never write over each other's ``task<N>`` in one checkout
    (ClawMark's task id is ``<folder>_task<N>``)."""
    domain, name = (document["domain"] or "").lower(), document["name"].lower()
    return identifier(name if domain in name else f"{domain} {name}", "coworkenv")[:80]


def exportable(check: dict) -> bool:
    return set(leaf_kinds(check)) <= EXPORTED_KINDS


def skip_reason(check: dict) -> str | None:
    """Why a check cannot be a ClawMark checker (None when it can)."""
    missing = sorted(set(leaf_kinds(check)) - EXPORTED_KINDS)
    if not missing:
        return None
    return "; ".join(
        f"{k}: {SKIP_REASONS.get(k, 'no evidence for it in ClawMark')}" for k in missing
    )


def _users(state: dict) -> dict:
    addresses = set()
    for collection in state.get("email", {}).values():
        for record in collection:
            for key in ("from", "to", "cc"):
                value = record.get(key)
                for a in value if isinstance(value, list) else [value]:
                    if isinstance(a, str) and "@" in a:
                        addresses.add(a.strip())
    users = {}
    for address in sorted(addresses):
        key = identifier(address.split("@")[0].lower(), "user")
        while key in users:
            key += "_"
        users[key] = {"email": address, "password": f"{key}_pwd"}
    return users


def _environments(state: dict) -> list[str]:
    found = ["filesystem"]
    if state.get("email"):
        found.append("email")
    if state.get("calendar", {}).get("events"):
        found.append("calendar")
    return found


def _prompt(task: dict) -> str:
    parts = [task["system"]] if task["system"] else []
    parts += [f"Constraint: {c}" for c in task["constraints"]]
    parts.append(
        "Your records are JSON files under /workspace/coworkenv/<service>/<collection>.json "
        "(one array of records each); read them, and make every change by editing them. "
        "Write your reply to each message in /workspace/outputs/replies/stage<N>.md, "
        "N being the message's number from 0."
    )
    return " ".join(p.replace("\n", " ") for p in parts)


def _checker_name(stage: str, grader_id: str, used: set[str]) -> str:
    base = f"_{'f' if stage == 'final' else 's' + stage[5:]}_{identifier(grader_id).lower()}"
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name


def task_source(document: dict, task: dict, number: int) -> str:
    spec = parse_spec(document)
    episode = Episode(spec, task["key"], faults=False)
    state = episode.state_snapshot()
    reference = [c.to_dict() for c in reference_footprint(spec, task["key"]).changes]
    skipped = [
        {
            "id": g["id"],
            "kinds": sorted(set(leaf_kinds(g["check"]))),
            "reason": skip_reason(g["check"]),
        }
        for g in task["graders"]
        if not exportable(g["check"])
    ]
    services = {s: list(cols) for s, cols in state.items()}
    users = _users(state)
    metadata = {
        "id": f"{domain_of(document)}_task{number}",
        "name": task["title"] or task["key"],
        "category": identifier((document["domain"] or "").lower(), "coworkenv"),
        "environments": _environments(state),
        "timeout_seconds": 600,
        "difficulty": "medium",
        "mm_level": "L2",
        "role": (task["system"].split(".")[0] if task["system"] else "assistant")[:200],
        "tags": ["coworkenv", *task["capabilities"]],
        "env_config": {"email": {"users": users}} if users else {},
        "coworkenv": {"task": task["key"], "skipped": skipped},
    }
    turns = [
        {"message": t["message"], "time": t["time"], "updates": t["updates"]} for t in task["turns"]
    ]
    clock = document["clock"]["start"]
    lines = [
        f'"""{in_docstring(in_comment(task["title"] or task["key"]))}: exported by CoworkEnv.',
        "",
        f'Environment "{in_docstring(in_comment(document["name"]))}", task "{task["key"]}": '
        f"{len(turns)} stage(s), one per",
        "turn. Records are JSON files under /workspace/coworkenv; the checkers evaluate",
        "CoworkEnv's declarative checks over each stage's workspace snapshot and the replies",
        "the agent writes to outputs/replies/stage<K>.md. Checks without evidence here are",
        'listed in METADATA["coworkenv"]["skipped"] with the reason.',
        '"""',
        "",
        "import sys",
        "from pathlib import Path",
        "",
        f'sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "{HELPER_DIR}"))',
        "",
        "from coworkenv_clawmark import (  # noqa: E402",
        "    TaskData,",
        "    apply_updates,",
        "    notification,",
        "    passes,",
        "    seed,",
        ")",
        "",
        f"METADATA = {python_literal(metadata)}",
        "",
        f"PROMPT = {python_literal(_prompt(task))}",
        "",
        f"SERVICES = {python_literal(services)}",
        "",
        f"INITIAL_STATE = {python_literal(state)}",
        "",
        f"TURNS = {python_literal(turns)}",
        "",
        "# The reference solution's net changes (side_effects checks compare the agent's to them)",
        f"REFERENCE_CHANGES = {python_literal(reference)}",
        "",
        "COWORKENV = TaskData(SERVICES, INITIAL_STATE, TURNS, REFERENCE_CHANGES)",
        "",
    ]
    for k, turn in enumerate(turns):
        seed_line = (
            '    await seed(ctx, INITIAL_STATE, METADATA["env_config"].get("email", {})'
            '.get("users", {}))\n'
            if k == 0
            else ""
        )
        kinds = ", ".join(
            ("silent " if u["silent"] else "loud ") + u["op"] for u in turn["updates"]
        )
        lines += [
            "",
            f"async def stage{k}(ctx):",
            f'    """Turn {k}{": " + kinds + " update(s)" if kinds else ""}."""',
            *([seed_line.rstrip("\n")] if seed_line else []),
            f'    notices = await apply_updates(ctx, TURNS[{k}]["updates"])',
            f'    message = notification(TURNS[{k}]["message"], notices, {k})',
            f'    return {{"notification": message, "time": TURNS[{k}]["time"] or {clock!r}}}',
            "",
        ]
    rubric: dict[str, list[str]] = {}
    used: set[str] = set()
    last = len(turns) - 1
    for g in task["graders"]:
        if not exportable(g["check"]):
            continue
        stage = "final" if g["at_turn"] is None else f"stage{g['at_turn']}"
        name = _checker_name(stage, g["id"], used)
        turn = last if g["at_turn"] is None else g["at_turn"]
        doc = in_docstring(in_comment(g["description"] or g["id"]))
        lines += [
            "",
            f"async def {name}(ctx) -> bool:",
            f'    """{doc}"""',
            f"    return await passes(ctx, COWORKENV, {python_literal(g['check'])}, {turn})",
            "",
        ]
        weight = max(1.0, min(2.0, float(g["weight"])))
        rubric.setdefault(stage, []).append(
            f'        {{"id": {json.dumps(g["id"])}, "checker": {name}, "weight": {weight}}},'
        )
    if skipped:
        lines += ["", "# Not exported (also in METADATA['coworkenv']['skipped']):"]
        lines += [f"#   {s['id']}: {in_comment(s['reason'])}" for s in skipped]
    lines += ["", "RUBRIC = {"]
    for stage in [f"stage{k}" for k in range(len(turns))] + ["final"]:
        lines.append(f'    "{stage}": [')
        lines += rubric.get(stage, [])
        lines.append("    ],")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    return re.sub(r"\n{3,}", "\n\n\n", text)


def export_files(document: dict, *, resolve: Resolver | None = None) -> dict[str, bytes]:
    """Path → content of the export; ``resolve`` reads the attachments' bytes
    (``MediaProblem`` when a file a view tool shows is missing)."""
    domain = domain_of(document)
    files: dict[str, bytes] = {}
    base = f"tasks/{domain}"
    files[f"{base}/{HELPER_DIR}/coworkenv_clawmark.py"] = shipped("coworkenv_clawmark.py")
    files[f"{base}/{HELPER_DIR}/requirements.txt"] = b"jmespath>=1.0\njsonschema>=4.18\n"
    files.update(engine_files(f"{base}/{HELPER_DIR}"))
    for number, task in enumerate(document["tasks"], start=1):
        media = task_media(document, task, resolve)
        files[f"{base}/task{number}/task.py"] = task_source(document, task, number).encode()
        files[f"{base}/task{number}/assets/AGENTS.md"] = _agents(task, media).encode()
        for item in media:
            files[f"{base}/task{number}/assets/{ATTACHMENTS}/{item.file_name}"] = item.data
    return files


ATTACHMENTS = "attachments"


def _attachments_note(media: list[Media]) -> str:
    if not media:
        return ""
    rows = "\n".join(
        f"- `{m.attachment.ref}`: `/workspace/{ATTACHMENTS}/{m.file_name}` "
        f"({m.attachment.media_type})"
        for m in media
    )
    return (
        "\nAttachments: a record field whose value is `sha256:<hex>` refers to a file; look "
        f"at the image itself (it is under `/workspace/{ATTACHMENTS}`):\n\n{rows}\n"
    )


def _agents(task: dict, media: list[Media]) -> str:
    return (
        f"# {task['title'] or task['key']}\n\n"
        "Your records are JSON files under `/workspace/coworkenv/<service>/<collection>.json`, "
        "one array of records each, every record with an `id`. Read them to answer; make "
        "every change (create, update, delete) by rewriting those files. Other people may "
        "change them between your working sessions.\n\n"
        "Output contract: write your reply to each message (what you would answer the "
        "person) in `outputs/replies/stage<N>.md` under `/workspace`, N being the message's "
        "number from 0; only the reply goes there.\n" + _attachments_note(media)
    )
