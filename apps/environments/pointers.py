"""Where a JSON pointer into a spec is shown on the environment's detail page.

Problems carry RFC 6901 pointers into the canonical document; the detail page gives every
task, turn, grader, tool and record an HTML id derived from its position, so a pointer maps
to a tab and an anchor on it. Pure functions: no Django, no database.
"""

import re

from apps.core.safeinput import is_id, parse_id

TABS = ("overview", "services", "tools", "tasks", "validation", "runs", "spec")
RECORDS_PER_PAGE = 50

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def anchor_part(value) -> str:
    """A fragment of an HTML id: names may hold anything, ids may not hold spaces or '#'."""
    return _UNSAFE.sub("_", str(value)) or "_"


def record_anchor(service: str, collection: str, index: int, task_index: int | None = None) -> str:
    base = f"record-{anchor_part(service)}-{anchor_part(collection)}-{index}"
    return base if task_index is None else f"task-{task_index}-{base}"


def collection_anchor(service: str, collection: str, task_index: int | None = None) -> str:
    base = f"collection-{anchor_part(service)}-{anchor_part(collection)}"
    return base if task_index is None else f"task-{task_index}-{base}"


def split_pointer(pointer: str) -> list[str] | None:
    """The unescaped reference tokens of a pointer, or None if it is not a pointer."""
    if pointer in ("", "/"):
        return []
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        return None
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _index(token: str) -> int | None:
    return parse_id(token)


def pointer_target(pointer: str) -> tuple[str, str]:
    """The (tab, anchor) that shows what ``pointer`` names; ("spec", "") when unknown."""
    tokens = split_pointer(pointer)
    if not tokens:
        return ("spec", "")
    head, rest = tokens[0], tokens[1:]
    if head in ("name", "domain", "description"):
        return ("overview", "about")
    if head == "services":
        return _services_target(rest, None)
    if head == "tools":
        if not rest:
            return ("tools", "tools")
        index = _index(rest[0])
        return ("tools", f"tool-{index}") if index is not None else ("spec", "")
    if head == "tasks":
        return _task_target(rest)
    return ("spec", "")


def _services_target(rest: list[str], task: int | None) -> tuple[str, str]:
    prefix = "" if task is None else f"task-{task}-"
    if not rest:
        return ("services", f"{prefix}services" if task is None else f"task-{task}-records")
    if len(rest) == 1:
        return ("services", f"{prefix}service-{anchor_part(rest[0])}")
    if len(rest) == 2:
        return ("services", collection_anchor(rest[0], rest[1], task))
    index = _index(rest[2])
    if index is None:
        return ("services", collection_anchor(rest[0], rest[1], task))
    return ("services", record_anchor(rest[0], rest[1], index, task))


def _task_target(rest: list[str]) -> tuple[str, str]:
    if not rest:
        return ("tasks", "tasks")
    task = _index(rest[0])
    if task is None:
        return ("spec", "")
    anchor = f"task-{task}"
    field, more = (rest[1], rest[2:]) if len(rest) > 1 else (None, [])
    first = _index(more[0]) if more else None
    if field == "records":
        return _services_target(more, task)
    if field == "graders":
        return ("tasks", f"{anchor}-grader-{first}" if first is not None else f"{anchor}-graders")
    if field == "turns":
        return ("tasks", f"{anchor}-turn-{first}" if first is not None else f"{anchor}-turns")
    if field == "reference_solution":
        if first is None:
            return ("tasks", f"{anchor}-solution")
        step = f"{anchor}-solution-{first}"
        if len(more) >= 3 and more[1] == "calls" and _index(more[2]) is not None:
            return ("tasks", f"{step}-call-{more[2]}")
        return ("tasks", step)
    return ("tasks", anchor)


def record_page(index: int) -> int:
    """The page of a collection table that shows the record at ``index`` (0-based)."""
    return index // RECORDS_PER_PAGE + 1


def page_param(service: str, collection: str) -> str:
    """The query parameter that pages one collection's table on the services tab."""
    return f"page-{anchor_part(service)}-{anchor_part(collection)}"


def pointer_page(pointer: str) -> tuple[str, int] | None:
    """For an environment-level record, the (query parameter, page) whose table shows it."""
    tokens = split_pointer(pointer)
    if tokens and len(tokens) >= 4 and tokens[0] == "services" and is_id(tokens[3]):
        return page_param(tokens[1], tokens[2]), record_page(parse_id(tokens[3]))
    return None
