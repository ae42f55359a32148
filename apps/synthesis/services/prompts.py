"""Render the versioned prompt templates in ``apps/synthesis/prompts/<version>/``.

The files are Django templates rendered with autoescaping off (the output is text for a
model, never HTML). A job records the version it used; older versions stay on disk, so a
job can be rerun or compared with the prompts it was made with.
"""

import json
from functools import lru_cache
from pathlib import Path

from django.template import Context, Engine

from coworkenv_engine import library
from coworkenv_engine.spec import spec_json_schema

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
CURRENT_PROMPT_VERSION = "v1"
SAMPLES_DIR = Path(__file__).resolve().parents[3] / "samples"
MAX_PROBLEMS_IN_REPAIR = 40


@lru_cache(maxsize=8)
def _engine(version: str) -> Engine:
    directory = PROMPTS_DIR / version
    if not (directory / "system.md").is_file():
        raise ValueError(f"Unknown prompt version {version!r}.")
    return Engine(dirs=[str(directory)], autoescape=False, debug=False)


def _render(version: str, name: str, context: dict) -> str:
    return (
        _engine(version).get_template(name).render(Context(context, autoescape=False)).strip()
        + "\n"
    )


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=1)
def _schema_text() -> str:
    return _compact(spec_json_schema())


@lru_cache(maxsize=8)
def _samples() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """(file name, service names, compact JSON) of each worked example, smallest first."""
    found = []
    for path in sorted(SAMPLES_DIR.glob("*.json")):
        document = json.loads(path.read_text())
        found.append((path.name, tuple(document.get("services", {})), _compact(document)))
    return tuple(sorted(found, key=lambda sample: len(sample[2])))


def worked_example(services: list[str]) -> tuple[str, str]:
    """(name, JSON) of the sample sharing the most services with the request (ties: the
    smallest), so the example shows the library the model is about to use."""
    samples = _samples()
    if not samples:
        return "", "{}"
    wanted = set(services)
    name, _, text = max(samples, key=lambda sample: (len(wanted & set(sample[1])), -len(sample[2])))
    return name, text


def _library_context(services: list[str]) -> tuple[list[dict], list[str]]:
    """Every standard kind with its collections; tools in full for the requested kinds (all
    kinds when none were requested), so the prompt stays as small as the request allows."""
    kinds = []
    for kind in library.KINDS.values():
        with_tools = not services or kind.name in services
        kinds.append(
            {
                "name": kind.name,
                "title": kind.title,
                "collections": [
                    {
                        "name": collection.name,
                        "description": collection.description,
                        "required": list(collection.required_fields),
                    }
                    for collection in kind.collections.values()
                ],
                "tools": [_compact(tool) for tool in kind.tools] if with_tools else [],
            }
        )
    references = [
        f"{r.service}.{r.collection}[].{r.field} -> {r.target_service}.{r.target_collection}"
        for r in library.CROSS_REFERENCES
    ]
    return kinds, references


def render_system(version: str) -> str:
    return _render(version, "system.md", {})


def render_draft(
    version: str,
    *,
    capabilities: list[dict],
    services: list[str],
    tasks_per_environment: int,
    turns: tuple[int, int],
    difficulty: str,
    domain_hint: str,
    scenario_hint: str,
    index: int,
    count: int,
    seed: int,
    avoid_names: list[str],
) -> str:
    kinds, references = _library_context(services)
    _, example = worked_example(services)
    return _render(
        version,
        "draft.md",
        {
            "capabilities": capabilities,
            "services": services,
            "tasks_per_environment": tasks_per_environment,
            "turns_min": turns[0],
            "turns_max": turns[1],
            "difficulty": difficulty,
            "domain_hint": domain_hint,
            "scenario_hint": scenario_hint,
            "index_human": index + 1,
            "count": count,
            "seed": seed,
            "avoid_names": avoid_names,
            "library": kinds,
            "cross_references": references,
            "schema": _schema_text(),
            "example": example,
        },
    )


def render_repair(
    version: str,
    *,
    round: int,
    max_rounds: int,
    report: dict | None = None,
    parse_error: str = "",
    truncated: bool = False,
) -> str:
    problems = list((report or {}).get("problems", []))
    # Errors first: they are what must change; warnings only help.
    problems.sort(key=lambda p: p.get("severity") != "error")
    shown = problems[:MAX_PROBLEMS_IN_REPAIR]
    return _render(
        version,
        "repair.md",
        {
            "round": round,
            "max_rounds": max_rounds,
            "parse_error": parse_error,
            "truncated": truncated,
            "problems": shown,
            "omitted": len(problems) - len(shown),
            "error_count": sum(1 for p in problems if p.get("severity") == "error"),
            "warning_count": sum(1 for p in problems if p.get("severity") == "warning"),
        },
    )
