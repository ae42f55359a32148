"""What adversaries see, kept incrementally, and the guesser's record-shaped patterns: the
fast forms give exactly what the plain ones give."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from coworkenv_engine.guessing import _shape
from coworkenv_engine.sightings import Harvester, Seen, harvest, records_in

CHARS = st.sampled_from(list("aZB9 -.@_\u00e9\u00b2PO\t\nx1"))


def plain_shape(value: str) -> re.Pattern[str] | None:
    """The shape as first written: the look-behind in front of the runs."""
    if not value or len(value) > 40 or "\n" in value:
        return None
    out = []
    for run in re.findall(r"[A-Z]+|[a-z]+|\d+|\s+|.", value):
        if run.isdigit():
            out.append(r"\d+")
        elif run.isupper() and run.isalpha():
            out.append(re.escape(run) if len(run) > 1 else "[A-Z]")
        elif run.islower() and run.isalpha():
            out.append("[a-z]+")
        elif run.isspace():
            out.append(r"\s")
        else:
            out.append(re.escape(run))
    body = "".join(out)
    if body in ("[a-z]+", r"\d+"):
        return None
    return re.compile(rf"(?<![\w@.-]){body}(?![\w@-])")


@settings(max_examples=300, deadline=None)
@given(st.text(CHARS, min_size=0, max_size=10), st.text(CHARS, max_size=200))
def test_shape_finds_what_the_plain_shape_finds(value, text):
    fast, plain = _shape(value), plain_shape(value)
    assert (fast is None) == (plain is None)
    if fast is not None:
        assert fast.findall(text) == plain.findall(text)


def test_shape_examples():
    assert _shape("PO-1234").findall("see PO-5025, xPO-1 and PO-77-") == ["PO-5025"]
    assert _shape("Dana Smith").findall("to Lee Chan.\nBob Stone@") == ["Lee Chan"]
    assert _shape("hello") is None


def plain_harvest(messages, *, user_turns=None) -> Seen:
    """harvest as first written: list scans over everything, from the start."""
    seen = Seen([], [], [], {})
    users = 0
    for m in messages:
        if m.get("role") == "user":
            users += 1
            if user_turns is None or users <= user_turns:
                seen.user_text.append(str(m.get("content") or ""))
        elif m.get("role") == "tool":
            try:
                content = json.loads(m.get("content") or "null")
            except ValueError:
                continue
            for record in records_in(content):
                if record not in seen.records:
                    seen.records.append(record)
                if record["id"] not in seen.ids:
                    seen.ids.append(record["id"])
                for key, value in record.items():
                    values = seen.fields.setdefault(key, [])
                    if value not in values:
                        values.append(value)
    return seen


SCALAR = st.one_of(st.integers(-3, 3), st.sampled_from([1.0, 2.5, True, False, None, "a", "b"]))
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner),
    max_leaves=6,
)
RECORD = st.fixed_dictionaries(
    {"id": st.sampled_from(["r1", "r2", "r3"])},
    optional={"a": VALUE, "b": VALUE, "c": VALUE},
)
MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["hi a@x.io", "b", ""])),
    st.builds(
        lambda rs: {"role": "tool", "content": json.dumps({"results": rs})},
        st.lists(RECORD, max_size=4),
    ),
    st.builds(lambda r: {"role": "tool", "content": json.dumps(r)}, RECORD),
    st.just({"role": "tool", "content": "not json"}),
    st.just({"role": "assistant", "content": "ok"}),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(MESSAGE, max_size=12), st.sampled_from([None, 1, 2]), st.integers(0, 12))
def test_incremental_harvest_equals_the_plain_harvest(messages, user_turns, cut):
    harvester = Harvester(user_turns=user_turns)
    harvester.update(messages[:cut])  # then the rest, as a growing conversation
    seen = harvester.update(list(messages))
    plain = plain_harvest(messages, user_turns=user_turns)
    assert (seen.user_text, seen.records, seen.ids, seen.fields) == (
        plain.user_text,
        plain.records,
        plain.ids,
        plain.fields,
    )
    assert seen.scalars() == list(dict.fromkeys(plain.scalars()))
    assert harvest(messages, user_turns=user_turns).records == plain.records
    # another conversation (not the last one extended) starts over
    other = [{"role": "user", "content": "fresh"}]
    assert harvester.update(other).user_text == ["fresh"]
