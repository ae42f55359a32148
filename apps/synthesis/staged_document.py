"""The working document of a staged draft: pure functions, no database.

At every step it is a complete environment in which placeholders stand for what is not
written yet; ``tasks[i].metadata.staged`` holds each task's outline and progress. These
functions apply a step's answer, say which step comes next, which step owns a problem's JSON
pointer, and what a step wrote (for its repair). ``apps.synthesis.services.staged`` asks the
model for each step.
"""

from __future__ import annotations

import copy

OUTLINE = "outline"

FINAL = "final"

PLACEHOLDER_GRADER = {
    "id": "staged-placeholder",
    "category": "completion",
    "weight": 1,
    "check": {"kind": "state", "query": "`true`", "op": "==", "value": True},
}


def turn_step(task: int, turn: int) -> str:
    return f"turn:{task}:{turn}"


def graders_step(task: int) -> str:
    return f"graders:{task}"


def _parts(pointer: str) -> list[str]:
    return [p for p in (pointer or "").split("/")[1:]]


def owner_of(pointer: str, document: dict) -> str:
    """The step that wrote what ``pointer`` points at."""
    parts = _parts(pointer)
    if not parts or parts[0] != "tasks" or len(parts) < 2 or not parts[1].isdigit():
        return OUTLINE if parts and parts[0] != "tasks" else graders_step(0)
    task = int(parts[1])
    if len(parts) == 2:
        return graders_step(task)
    field = parts[2]
    if field == "turns" and len(parts) > 3 and parts[3].isdigit():
        return turn_step(task, int(parts[3]))
    if field == "reference_solution" and len(parts) > 3 and parts[3].isdigit():
        steps = task_at(document, task).get("reference_solution") or []
        index = int(parts[3])
        if index < len(steps) and isinstance(steps[index], dict):
            return turn_step(task, int(steps[index].get("turn", 0)))
        return graders_step(task)
    if field in ("graders", "scoring", "turns", "reference_solution"):
        return graders_step(task)
    return OUTLINE


def task_at(document: dict, index: int) -> dict:
    tasks = document.get("tasks") or []
    return tasks[index] if 0 <= index < len(tasks) and isinstance(tasks[index], dict) else {}


def staged_meta(task: dict) -> dict:
    return (task.get("metadata") or {}).get("staged") or {}


def errors_of(report: dict, step: str, document: dict) -> list[dict]:
    return [
        p
        for p in report.get("problems", [])
        if p.get("severity") == "error" and owner_of(p.get("pointer", ""), document) == step
    ]


class StepRefused(ValueError):
    """An answer that has the wrong shape for its step (a problem for the repair round)."""

    def __init__(self, pointer: str, message: str):
        super().__init__(message)
        self.problem = {
            "code": "staged_answer_shape",
            "severity": "error",
            "pointer": pointer,
            "message": message,
            "hint": "Answer with one JSON object of the shape the stage asks for.",
        }


def apply_outline(answer: dict) -> dict:
    document = copy.deepcopy(answer)
    tasks = document.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise StepRefused("/tasks", "The outline has no tasks.")
    for index, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise StepRefused(f"/tasks/{index}", "A task must be an object.")
        outline = task.pop("outline", None)
        if (
            not isinstance(outline, list)
            or not outline
            or not all(isinstance(e, dict) and isinstance(e.get("summary"), str) for e in outline)
        ):
            raise StepRefused(
                f"/tasks/{index}/outline",
                "Each task needs an `outline`: a list of {time, summary} entries, one per turn.",
            )
        task["turns"] = [_placeholder_turn(entry) for entry in outline]
        task["reference_solution"] = []
        task["graders"] = [dict(PLACEHOLDER_GRADER)]
        metadata = task.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise StepRefused(f"/tasks/{index}/metadata", "A task's metadata must be an object.")
        metadata["staged"] = {"outline": outline, "expanded": 0, "graded": False}
    return document


def _placeholder_turn(entry: dict) -> dict:
    turn = {"message": entry["summary"].strip() or "(to be written)"}
    if isinstance(entry.get("time"), str):
        turn["time"] = entry["time"]
    return turn


def apply_turn(document: dict, task_index: int, turn: int, answer: dict) -> dict:
    pointer = f"/tasks/{task_index}/turns/{turn}"
    if not isinstance(answer.get("message"), str) or not isinstance(answer.get("calls", []), list):
        raise StepRefused(pointer, "A turn needs a `message` (text) and `calls` (a list).")
    document = copy.deepcopy(document)
    task = document["tasks"][task_index]
    written = {"message": answer["message"]}
    for key in ("time", "updates"):
        if answer.get(key) is not None:
            written[key] = answer[key]
    task["turns"][turn] = written
    steps = [s for s in task.get("reference_solution") or [] if s.get("turn") != turn]
    if answer.get("calls") or answer.get("reply") is not None:
        step = {"turn": turn, "calls": answer.get("calls") or []}
        if answer.get("reply") is not None:
            step["reply"] = answer["reply"]
        steps.append(step)
    task["reference_solution"] = sorted(steps, key=lambda s: s.get("turn", 0))
    staged = task["metadata"]["staged"]
    staged["expanded"] = max(staged.get("expanded", 0), turn + 1)
    return document


def apply_graders(document: dict, task_index: int, answer: dict) -> dict:
    graders = answer.get("graders")
    if not isinstance(graders, list) or not graders:
        raise StepRefused(f"/tasks/{task_index}/graders", "Answer with a non-empty `graders` list.")
    document = copy.deepcopy(document)
    task = document["tasks"][task_index]
    task["graders"] = graders
    if isinstance(answer.get("scoring"), dict):
        task["scoring"] = answer["scoring"]
    task["metadata"]["staged"]["graded"] = True
    return document


def finished_document(document: dict) -> dict:
    """The working document without the staging marks."""
    document = copy.deepcopy(document)
    for task in document.get("tasks") or []:
        metadata = task.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("staged", None)
            if not metadata:
                task.pop("metadata")
    return document


def next_step(document: dict) -> str:
    """The first turn not yet written, then the first task without graders, then final."""
    tasks = document.get("tasks") or []
    for index, task in enumerate(tasks):
        staged = staged_meta(task)
        if staged and staged.get("expanded", 0) < len(staged.get("outline") or []):
            return turn_step(index, staged["expanded"])
    for index, task in enumerate(tasks):
        staged = staged_meta(task)
        if staged and not staged.get("graded"):
            return graders_step(index)
    return FINAL


def current_of(step: str, document: dict) -> dict:
    """What ``step`` wrote, in the shape it was asked for (shown to its repair)."""
    if step.startswith("turn:"):
        _, task_index, turn = step.split(":")
        task = task_at(document, int(task_index))
        written = dict(task["turns"][int(turn)])
        reference = next(
            (s for s in task.get("reference_solution") or [] if s.get("turn") == int(turn)), {}
        )
        written["calls"] = reference.get("calls", [])
        if "reply" in reference:
            written["reply"] = reference["reply"]
        return written
    if step.startswith("graders:"):
        task = task_at(document, int(step.split(":")[1]))
        return {"graders": task.get("graders", []), "scoring": task.get("scoring")}
    return finished_document(document)
