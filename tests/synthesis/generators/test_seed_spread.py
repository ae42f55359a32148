"""Every family x capability validates at sensitivity 1.0 over a deterministic spread of
seeds and horizons (the full sweep is ``python -m bench.generator_sweep``)."""

from __future__ import annotations

import pytest

from apps.synthesis.generators import CAPABILITY_PATTERNS, FAMILIES, generate_environment
from apps.synthesis.generators.receipts import generate_receipts_environment
from bench.generator_sweep import main as sweep
from bench.generator_sweep import seed_range
from coworkenv_engine.validation import validate_spec

SLUGS = sorted(CAPABILITY_PATTERNS)
COMBOS = [(family, slug) for family in sorted(FAMILIES) for slug in SLUGS]
SEEDS = range(6)


def _spread() -> list[tuple[str, str, str, int]]:
    """(horizon, family, capability, seed) draws. Short: two seeds of 0..5 per family x
    capability, so each family and each capability meets every seed; medium: every other
    family x capability (each capability in two or three families); long (the slowest to
    validate): one family per capability. About 200 draws: under a minute of CPU."""
    draws = []
    families = sorted(FAMILIES)
    for f, family in enumerate(families):
        for c, slug in enumerate(SLUGS):
            first = 2 * ((f + c) % 3)
            draws += [("short", family, slug, seed) for seed in (first, first + 1)]
            if (f + c) % 2 == 0:
                draws.append(("medium", family, slug, SEEDS[(f + c) // 2 % len(SEEDS)]))
    for k, slug in enumerate(SLUGS):
        draws.append(("long", families[k % len(families)], slug, SEEDS[k % len(SEEDS)]))
    return draws


def assert_valid(doc: dict, attachments=None) -> None:
    report = validate_spec(doc, attachments=attachments, time_budget=None)
    # Long projects replay a sample of mutants and say so; nothing else may be reported.
    problems = [(p.code, p.pointer, p.message) for p in report.problems]
    assert report.valid, problems
    assert [p for p in problems if p[0] != "mutants_sampled"] == []
    assert [t.sensitivity for t in report.tasks] == [1.0] * len(doc["tasks"])
    assert all(t.oracle_strict and t.deterministic for t in report.tasks)


def test_the_spread_covers_every_family_capability_and_horizon():
    draws = _spread()
    assert {(f, c) for h, f, c, _ in draws if h == "short"} == set(COMBOS)
    for horizon in ("medium", "long"):
        assert {c for h, _, c, _ in draws if h == horizon} == set(SLUGS)
        assert {f for h, f, _, _ in draws if h == horizon} == set(FAMILIES)
    for family in FAMILIES:
        assert {s for h, f, _, s in draws if h == "short" and f == family} == set(SEEDS)
    for slug in SLUGS:
        assert {s for h, _, c, s in draws if h == "short" and c == slug} == set(SEEDS)


@pytest.mark.parametrize(("horizon", "family", "capability", "seed"), _spread())
def test_every_draw_of_the_spread_is_valid(horizon, family, capability, seed):
    doc = generate_environment(
        seed=seed,
        capabilities=[capability],
        family=family,
        tasks_per_environment=1,
        horizon=horizon,
    )
    assert_valid(doc)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_receipts_seed_is_valid(seed):
    doc, files = generate_receipts_environment(seed=seed, tasks=2)
    assert_valid(doc, files.get)


# --------------------------------------------------------------------------- regressions


@pytest.mark.parametrize("horizon", ["short", "medium", "long"])
@pytest.mark.parametrize("seed", [0, 3])
def test_support_desk_conflicts_name_an_assignee_the_agent_can_see(seed, horizon):
    """The fallback assignee of a support-desk conflict was named without an address: the
    reference's ``update_ticket`` used one the agent could not read anywhere
    (``reference_value_unseen``) unless a filler ticket happened to list it."""
    doc = generate_environment(
        seed=seed, capabilities=["resolve-conflicts"], family="support-desk", horizon=horizon
    )
    assert_valid(doc)
    for task in doc["tasks"]:
        (step,) = [s for s in task["reference_solution"] if s["turn"] == 0]
        (assignee,) = [
            c["arguments"]["assignee"] for c in step["calls"] if "assignee" in c["arguments"]
        ]
        assert assignee in task["turns"][0]["message"], task["key"]


# --------------------------------------------------------------------------- the sweep


def test_the_sweep_parses_seed_ranges():
    assert seed_range("0-2,7,9-10") == [0, 1, 2, 7, 9, 10]


def test_the_sweep_validates_and_counts_each_draw(capsys):
    families = ["--family", "support-desk", "--family", "receipts"]
    capabilities = ["--capability", "resolve-conflicts", "--capability", "extract-from-documents"]
    code = sweep(["--seeds", "0,3", *families, *capabilities, "--horizon", "short"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "INVALID" not in out
    # support-desk x 2 capabilities + receipts, two seeds each
    assert "6/6 environments valid at sensitivity 1.0, 0 not (0 crashed)" in out
