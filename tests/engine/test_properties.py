"""Properties of the simulator under arbitrary call sequences."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.simulator import Episode, Limits
from coworkenv_engine.spec import load_spec

from .helpers import mini_doc

DOC = mini_doc()
for _tool in DOC["tools"]:
    _tool["faults"] = {"rate": 0.2, "kinds": ["rate_limit", "server_error", "timeout"]}
SPEC = load_spec(DOC)
LIMITS = Limits(max_calls=25, max_state_bytes=6_000, max_record_bytes=600, max_result_chars=700)
TOOL_NAMES = [t.name for t in SPEC.tools] + ["nope"]

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=30)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3), max_leaves=6)
ids = st.sampled_from(["e1", "events-1", "events-2", "m1", "zz"])
dates = st.sampled_from(["2026-03-05T10:00:00Z", "not a date"])
arguments = st.fixed_dictionaries(
    {},
    optional={
        "event_id": ids,
        "title": st.text(max_size=300),
        "start": dates,
        "end": dates,
        "attendees": st.lists(st.text(max_size=10), max_size=3),
        "to": st.text(max_size=20),
        "subject": st.text(max_size=20),
        "body": st.text(max_size=200),
        "query": st.text(max_size=10),
        "extra": values,
    },
)
calls = st.lists(
    st.tuples(st.sampled_from(TOOL_NAMES), arguments | st.text(max_size=10)), max_size=30
)
turns = st.lists(st.integers(0, 2), max_size=30)


def _play(seq, advances, seed):
    ep = Episode(SPEC, "book", seed, limits=LIMITS)
    ep.advance_turn()
    hashes = []
    for i, (name, args) in enumerate(seq):
        if i < len(advances) and advances[i] == 0:
            ep.advance_turn()
        before = ep.state_hash()
        result = ep.call(name, args)
        if not result.ok:
            assert ep.state_hash() == before, (name, args, result)
        hashes.append(ep.state_hash())
    return ep, hashes


@settings(max_examples=60, deadline=None)
@given(calls, turns, st.integers(0, 3))
def test_state_stays_json_and_within_bounds_and_failures_change_nothing(seq, advances, seed):
    ep, _ = _play(seq, advances, seed)
    text = json.dumps(ep.state, allow_nan=False)
    assert json.loads(text) == ep.state_snapshot()
    assert ep.state_bytes <= LIMITS.max_state_bytes
    assert len(text) <= LIMITS.max_state_bytes
    assert sum(1 for e in ep.audit_log if e.error_code != "call_limit") <= LIMITS.max_calls
    for entry in ep.audit_log:
        json.dumps(entry.to_dict(), allow_nan=False)
        if entry.ok:
            assert len(entry.result_text) <= LIMITS.max_result_chars
        else:
            assert entry.diff == ()


@settings(max_examples=40, deadline=None)
@given(calls, turns, st.integers(0, 3))
def test_replay_with_the_same_seed_is_identical(seq, advances, seed):
    first, hashes_a = _play(seq, advances, seed)
    second, hashes_b = _play(seq, advances, seed)
    assert hashes_a == hashes_b
    assert [e.to_dict() for e in first.audit_log] == [e.to_dict() for e in second.audit_log]
    assert first.state_hash() == second.state_hash()
    first.reset()
    replay, _ = _play(seq, advances, seed)
    assert replay.state_hash() == second.state_hash()
