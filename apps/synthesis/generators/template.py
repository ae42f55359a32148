"""``generate_environment``: a seeded, deterministic template generator.

It picks a scenario family, builds one world (company, people, services, tools), one task
per requested capability slot (round-robin over ``capabilities``) using that capability's
pattern, pads each task to its turn count with small add-on requests, fills every
collection with realistic filler, adds the ``no-collateral`` side-effects safety grader to
every task and weighs its capability grader to be decisive, and returns a
``coworkenv.environment/v1`` document that the engine's validator accepts with grader
sensitivity 1.0 and no adversary passing.

Pure Python: one ``random.Random(seed)`` drives every choice; no clock, no global random,
no Django.
"""

from __future__ import annotations

import random
import re
from typing import Any

from coworkenv_engine import library
from coworkenv_engine.policies import OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import SCHEMA_ID, parse_spec
from coworkenv_engine.validation.dynamic import FAULT_SEEDS

from .families import FAMILIES, Family, families_for, fill
from .long_horizon import HORIZONS, SHAPES, Shape, extend_project, is_project
from .patterns import addon, pattern_for
from .world import DIFFICULTY, TaskBuilder, World, iso

GENERATOR_VERSION = 1
MAX_TASKS = 50
MAX_TURNS = 20
STANDARD_SERVICES = tuple(library.KINDS)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "task"


def _check_arguments(
    capabilities: list[str],
    services: list[str] | None,
    tasks_per_environment: int,
    turns: tuple[int, int],
    difficulty: str,
    family: str | None,
    eval_fraction: float,
    horizon: str = "short",
) -> None:
    if not capabilities or not all(isinstance(c, str) and c.strip() for c in capabilities):
        raise ValueError("capabilities: give at least one non-empty capability slug")
    unknown = [s for s in services or [] if s not in STANDARD_SERVICES]
    if unknown:
        raise ValueError(
            f"services: unknown {', '.join(unknown)} (standard: {', '.join(STANDARD_SERVICES)})"
        )
    if not 1 <= tasks_per_environment <= MAX_TASKS:
        raise ValueError(f"tasks_per_environment must be 1..{MAX_TASKS}")
    lo, hi = turns
    if not 1 <= lo <= hi <= MAX_TURNS:
        raise ValueError(f"turns must be (lo, hi) with 1 <= lo <= hi <= {MAX_TURNS}")
    if difficulty not in DIFFICULTY:
        raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTY)}")
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}")
    if not 0 <= eval_fraction <= 1:
        raise ValueError("eval_fraction must be between 0 and 1")
    if horizon not in HORIZONS:
        raise ValueError(f"horizon must be one of {', '.join(HORIZONS)}")


def generate_environment(
    *,
    seed: int,
    capabilities: list[str],
    services: list[str] | None = None,
    tasks_per_environment: int = 3,
    turns: tuple[int, int] = (1, 3),
    difficulty: str = "medium",
    family: str | None = None,
    eval_fraction: float = 1 / 3,
    horizon: str = "short",
    shape: Shape | None = None,
) -> dict[str, Any]:
    """A complete, valid environment document for ``capabilities``.

    ``services`` are included (the family's own services are added to them); ``family``
    forces a scenario family (default: one that covers the services, chosen by the seed).
    Task ``i`` exercises ``capabilities[i % len(capabilities)]`` with ``lo..hi`` turns;
    ``floor(tasks * eval_fraction)`` tasks (chosen by the seed) go to the eval split.
    ``horizon`` chooses the mix (``long_horizon.SHAPES``): ``short`` gives today's tasks;
    under ``medium`` every second task, under ``long`` every task, is a multi-day project
    whose length comes from the horizon (``turns`` then bounds only the short tasks);
    ``shape`` overrides that length (``bench/horizon.py`` makes 200-call projects with it).
    Raises ValueError on arguments outside what the synthesis form allows.
    """
    turns = (int(turns[0]), int(turns[1]))
    _check_arguments(
        capabilities,
        services,
        tasks_per_environment,
        turns,
        difficulty,
        family,
        eval_fraction,
        horizon,
    )
    pick = random.Random(seed)
    fam: Family = FAMILIES[family] if family else pick.choice(families_for(services))
    # One stream per (seed, family): the same seed in two families gives unrelated content.
    rng = random.Random(f"coworkenv-template/{seed}/{fam.key}")
    names = list(fam.services) + [s for s in services or [] if s not in fam.services]
    if "tickets" in names and "crm" not in names:
        names.append("crm")  # tickets refer to CRM customers
    world = World.create(rng, names, difficulty)

    n_eval = int(tasks_per_environment * eval_fraction + 1e-9)
    eval_tasks = set(rng.sample(range(tasks_per_environment), n_eval))
    builders: list[TaskBuilder] = []
    projects: dict[str, dict[str, Any]] = {}
    lo, hi = turns
    for i in range(tasks_per_environment):
        capability = capabilities[i % len(capabilities)]
        pattern = pattern_for(capability)
        project = is_project(horizon, i, tasks_per_environment)
        if not project:
            n_turns = rng.randint(max(lo, pattern.turns) if pattern.turns <= hi else lo, hi)
        t = TaskBuilder(world, f"{_slug(capability)}-{i + 1}", "", [capability])
        t.system = (
            f"You are {fam.role} of {world.me} at {world.company}. Act only through the tools "
            "and say what you did. Write times as HH:MM (24-hour) and dates as YYYY-MM-DD."
        )
        item = fam.new_item(t)
        if project:
            shape = shape or SHAPES[horizon]
            n_turns = rng.randint(max(shape.turns[0], pattern.turns + 1), shape.turns[1])
            t.project = True
            t.system += " This is a project over several days; keep track of what you did."
            pattern.build(t, item, pattern.turns)
            projects[t.key] = extend_project(t, fam.new_item, shape, n_turns)
        else:
            pattern.build(t, item, n_turns)
            for k in range(len(t.turns), n_turns):
                addon(t, k)
        t.no_collateral()
        t.make_decisive()
        t.title = f"{pattern.title}: {item.label}"
        t.split = "eval" if i in eval_tasks else "train"
        builders.append(t)
    fill(world, fam)

    tasks = []
    for t in builders:
        task = t.to_dict()
        task["metadata"] = {"pattern": pattern_for(t.capabilities[0]).key}
        if t.key in projects:
            task["metadata"]["project"] = projects[t.key]
        tasks.append(task)
    doc: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "name": f"{world.company} - {fam.title.lower()}",
        "domain": fam.domain,
        "description": (
            f"{fam.description} Generated from the '{fam.key}' template for "
            f"{', '.join(dict.fromkeys(capabilities))}."
        ),
        "clock": {"start": iso(world.start), "step_seconds": 60},
        "services": world.services,
        "tools": world.tools,
        "tasks": tasks,
        "metadata": {
            "generator": "template",
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
            "family": fam.key,
            "difficulty": difficulty,
            "turns": list(turns),
            "horizon": horizon,
        },
    }
    _tame_faults(doc)
    return doc


def _faulty_tasks(doc: dict[str, Any]) -> list[str]:
    flaky = {t["name"] for t in doc["tools"] if (t.get("faults") or {}).get("rate", 0) > 0}
    return [
        task["key"]
        for task in doc["tasks"]
        if any(c["tool"] in flaky for s in task["reference_solution"] for c in s["calls"])
    ]


def _tame_faults(doc: dict[str, Any]) -> None:
    """Make sure the retrying oracle passes under the validator's fault seeds.

    Faults are pseudo-random per (seed, call, tool): a rare unlucky streak could exhaust
    the oracle's retries. If one does, lower every fault rate and try again.
    """
    for _ in range(4):
        keys = _faulty_tasks(doc)
        if not keys:
            return
        spec = parse_spec(doc)
        ok = all(
            run_task(spec, key, OraclePolicy(), seed=seed, faults=True).grading.strict
            for key in keys
            for seed in FAULT_SEEDS
        )
        if ok:
            return
        for tool in doc["tools"]:
            if tool.get("faults"):
                tool["faults"]["rate"] = round(tool["faults"]["rate"] / 2, 3)
    for tool in doc["tools"]:
        tool.pop("faults", None)
