"""Shared replays (replays.py): runs that follow a trie give exactly the episodes run from
the start, and validation with them gives exactly the reports it gives without them."""

from __future__ import annotations

import pytest

import coworkenv_engine.validation.dynamic as dynamic
from apps.synthesis.generators.template import generate_environment
from coworkenv_engine.adversaries import ADVERSARIES
from coworkenv_engine.policies import (
    EchoPolicy,
    MutantPolicy,
    NullPolicy,
    OraclePolicy,
    state_changing_calls,
)
from coworkenv_engine.replays import Replays, checkpoint, restore, same_json
from coworkenv_engine.runner import run_task
from coworkenv_engine.simulator import Episode
from coworkenv_engine.spec import canonical_json, load_spec
from coworkenv_engine.validation import validate_spec

from .helpers import SAMPLES, load_json


def fingerprint(result) -> str:
    return canonical_json(
        [
            result.policy,
            result.stop_reason,
            result.state_hash,
            result.audit_log,
            result.transcript,
            result.grading.to_dict(),
            result.exogenous_log,
            result.final_state,
            {str(k): v for k, v in result.turn_snapshots.items()},
        ]
    )


def policies(spec, task):
    out = [OraclePolicy(), NullPolicy(), EchoPolicy()]
    out += [entry.factory() for entry in ADVERSARIES.values() if entry.applies(task)]
    n = len(state_changing_calls(spec, task))
    out += [MutantPolicy(i) for i in range(0, n, max(1, n // 6))]  # the first, and a spread
    return out


def long_doc() -> dict:
    return generate_environment(
        seed=7,
        capabilities=["cross-service-orchestration"],
        family="procurement",
        tasks_per_environment=1,
        horizon="long",
    )


@pytest.mark.parametrize(
    "doc", [load_json(SAMPLES[0]), long_doc()], ids=[SAMPLES[0].stem, "long-horizon"]
)
def test_runs_through_a_shared_trie_equal_runs_from_the_start(doc):
    spec = load_spec(doc)
    for task in spec.tasks:
        replays = Replays()
        alone = [run_task(spec, task.key, p, faults=False) for p in policies(spec, task)]
        shared = [
            run_task(spec, task.key, p, faults=False, replays=replays) for p in policies(spec, task)
        ]
        assert [fingerprint(r) for r in shared] == [fingerprint(r) for r in alone]
        assert replays.replayed > 0  # something was shared, not only recorded
        # a second pass follows the trie all the way: nothing executed again
        executed = replays.executed
        again = [
            run_task(spec, task.key, p, faults=False, replays=replays) for p in policies(spec, task)
        ]
        assert replays.executed == executed
        assert [fingerprint(r) for r in again] == [fingerprint(r) for r in alone]


def test_a_trie_serves_one_seed_faults_setting_and_task_only():
    spec = load_spec(load_json(SAMPLES[0]))
    task = spec.tasks[0]
    replays = Replays()
    run_task(spec, task.key, OraclePolicy(), faults=False, replays=replays)
    recorded = replays.nodes
    faulty = run_task(spec, task.key, OraclePolicy(), faults=True, seed=3, replays=replays)
    assert replays.nodes == recorded  # not recorded: it ran on its own
    assert fingerprint(faulty) == fingerprint(
        run_task(spec, task.key, OraclePolicy(), faults=True, seed=3)
    )


def test_restore_puts_an_episode_back_where_it_was():
    spec = load_spec(load_json(SAMPLES[0]))
    task = spec.tasks[0]
    episode = Episode(spec, task.key, faults=False)
    episode.advance_turn()
    step = task.step_for_turn(0)
    first = step.calls[0]
    episode.call(first.tool, first.arguments)
    cp = checkpoint(episode)
    before = (episode.state_hash(), len(episode.audit_log), episode.clock_iso())
    for call in step.calls:
        episode.call(call.tool, call.arguments)
    episode.advance_turn()
    restore(episode, cp)
    assert (episode.state_hash(), len(episode.audit_log), episode.clock_iso()) == before
    # and the checkpoint is not changed by the episode going on from it
    for call in step.calls:
        episode.call(call.tool, call.arguments)
    restore(episode, cp)
    assert episode.state_hash() == before[0]


def test_same_json_tells_apart_what_the_simulator_tells_apart():
    assert same_json({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not same_json({"a": 1}, {"a": 1.0})
    assert not same_json({"a": 1}, {"a": True})
    assert not same_json({"a": [1]}, {"a": (1,)})
    assert not same_json({"a": 1}, {"b": 1})


@pytest.mark.parametrize(
    "doc",
    [
        load_json(SAMPLES[-1]),
        generate_environment(
            seed=1002, capabilities=["clarify-before-acting", "resolve-conflicts"], turns=(1, 3)
        ),
        long_doc(),
    ],
    ids=[SAMPLES[-1].stem, "template", "long-horizon"],
)
def test_validation_reports_are_the_same_with_and_without_shared_replays(doc, monkeypatch):
    shared = validate_spec(doc).to_dict()
    monkeypatch.setattr(dynamic, "SHARE_REPLAYS", False)
    alone = validate_spec(doc).to_dict()
    assert canonical_json(shared) == canonical_json(alone)


# Digests of [task reports, every episode's (policy, seed, faults, state hash, score, strict,
# calls)] as validation gave them before the speed work (commit 485dac2: no shared replays,
# no compiled queries, no memo). A change that means to change verdicts (a new adversary, a
# generator change) updates them: print them with the loop below in a Python shell.
PINNED = {
    "support-desk": "56fc77e523603b446f08717a5070def7c8e636ab279395d7d109c76c9e81b9f2",
    "template": "7d414fd9e894e953f00f13f764da80e1e84518e14f57cd64824805f53276d497",
    "long-horizon": "72c3d4edfb4aedcb9af24eeb36a3bb577009b1a5ff7dfbb8bde948598a272958",
}


def test_validation_gives_the_verdicts_it_gave_before_the_speed_work(monkeypatch):
    import hashlib

    docs = {
        "support-desk": next(load_json(p) for p in SAMPLES if p.stem == "support-desk"),
        "template": generate_environment(
            seed=1002, capabilities=["clarify-before-acting", "resolve-conflicts"], turns=(1, 3)
        ),
        "long-horizon": long_doc(),
    }
    runs: list = []
    original = dynamic.run_task

    def recording(*args, **kwargs):
        r = original(*args, **kwargs)
        runs.append(
            [
                r.policy,
                r.seed,
                r.faults,
                r.state_hash,
                r.grading.score,
                r.grading.strict,
                len(r.audit_log),
            ]
        )
        return r

    monkeypatch.setattr(dynamic, "run_task", recording)
    got = {}
    for name, doc in docs.items():
        runs.clear()
        tasks = validate_spec(doc).to_dict()["tasks"]
        got[name] = hashlib.sha256(canonical_json([tasks, runs]).encode()).hexdigest()
    assert got == PINNED
