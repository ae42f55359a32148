"""Declarative checks (graders) evaluated over state, audit log and agent messages.

Nothing here evaluates code: queries are JMESPath, patterns go through ``safe_regex``,
and the only outside call is the optional injected judge. A check never raises: an
error while evaluating (a JMESPath type error, a broken judge) fails it with evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from jmespath.exceptions import JMESPathError

from .bindings import normalize_text
from .bounded_query import search as bounded_search
from .judging import declared_context, state_of
from .safe_regex import UnsafeRegex, safe_search
from .side_effects import Footprint, collateral, net_changes

Judge = Callable[[str, dict[str, Any]], Any]
MAX_DEPTH = 8
_MISSING = object()


@dataclass(frozen=True)
class Verdict:
    grader_id: str
    category: str
    weight: float
    status: str  # "passed" | "failed" | "skipped"
    evidence: dict[str, Any] = field(default_factory=dict)
    at_turn: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "grader_id": self.grader_id,
            "category": self.category,
            "weight": self.weight,
            "status": self.status,
            "at_turn": self.at_turn,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class Call:
    """The part of an audit entry checks look at."""

    seq: int
    turn: int
    tool: str
    arguments: dict[str, Any]
    ok: bool
    error_code: str | None = None
    diff: tuple[dict[str, Any], ...] = ()  # the state changes of a successful call

    @classmethod
    def of(cls, entry: Any) -> Call:
        if isinstance(entry, Call):
            return entry
        if isinstance(entry, dict):
            return cls(
                entry["seq"],
                entry["turn"],
                entry["tool"],
                entry.get("arguments") or {},
                bool(entry["ok"]),
                entry.get("error_code"),
                tuple(entry.get("diff") or ()),
            )
        return cls(
            entry.seq,
            entry.turn,
            entry.tool,
            entry.arguments or {},
            entry.ok,
            entry.error_code,
            tuple(getattr(entry, "diff", ()) or ()),
        )

    def brief(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "turn": self.turn,
            "tool": self.tool,
            "arguments": self.arguments,
            "ok": self.ok,
        }


@dataclass
class CheckView:
    """What a check sees: the state, calls and assistant messages up to a turn."""

    state: dict[str, Any]
    calls: list[Call]
    replies: list[tuple[int, str]]  # (turn, assistant text), in order
    last_turn: int
    messages: list[dict[str, Any]]
    task_key: str = ""
    judge: Judge | None = None
    # the reference solution's changes (side_effects checks), already cut at the view's turn
    reference: Footprint | None = None
    # (id(check), id(state)) -> (check, state, status, evidence) of state checks, given only
    # where ``state`` is never changed (the shared state views of replays.py)
    state_memo: dict[tuple[int, int], tuple[Any, ...]] | None = None


def run_query(query: str, state: Any) -> Any:
    """Evaluate under the query work budget (bounded_query)."""
    return bounded_search(query, state)


# --------------------------------------------------------------------------- comparisons


def json_equal(a: Any, b: Any, ignore_case: bool = False) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold() if ignore_case else a == b
    if isinstance(a, list) and isinstance(b, list):
        pairs = zip(a, b, strict=False)
        return len(a) == len(b) and all(json_equal(x, y, ignore_case) for x, y in pairs)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], ignore_case) for k in a)
    return a is None and b is None


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _present(x: Any) -> bool:
    return x is not _MISSING and x is not None and x != [] and x != {} and x != ""


def compare(op: str, actual: Any, expected: Any = None, ignore_case: bool = False) -> bool:
    """Apply a check operator. Type mismatches compare False rather than raising."""
    if op == "exists":
        return _present(actual)
    if op == "absent":
        return not _present(actual)
    if actual is _MISSING:
        actual = None
    if op == "==":
        return json_equal(actual, expected, ignore_case)
    if op == "!=":
        return not json_equal(actual, expected, ignore_case)
    if op in (">", ">=", "<", "<="):
        if _is_number(actual) and _is_number(expected):
            a, b = actual, expected
        elif isinstance(actual, str) and isinstance(expected, str):
            a, b = (actual.casefold(), expected.casefold()) if ignore_case else (actual, expected)
        else:
            return False
        return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op]
    if op == "contains":
        if isinstance(actual, list):
            return any(json_equal(x, expected, ignore_case) for x in actual)
        if isinstance(actual, str) and isinstance(expected, str):
            return expected.casefold() in actual.casefold() if ignore_case else expected in actual
        if isinstance(actual, dict) and isinstance(expected, str):
            return expected in actual
        return False
    if op == "matches":
        if not isinstance(expected, str):
            return False
        texts = actual if isinstance(actual, list) else [actual]
        return any(isinstance(t, str) and safe_search(expected, t) for t in texts)
    raise ValueError(f"unknown operator {op!r}")


def clip(value: Any, max_chars: int = 2000) -> Any:
    """Evidence must stay small: long lists keep their head and a count."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)[:max_chars]
    if len(text) <= max_chars:
        return value
    if isinstance(value, list):
        head: list[Any] = []
        used = 0
        for item in value:
            size = len(json.dumps(item, ensure_ascii=False, default=str))
            if used + size > max_chars:
                break
            head.append(item)
            used += size
        return {"items": head, "total": len(value), "clipped": True}
    return {"preview": text[:max_chars], "clipped": True}


# --------------------------------------------------------------------------- evaluation


def evaluate(check: dict[str, Any], view: CheckView, depth: int = 0) -> tuple[str, dict]:
    """Return (status, evidence) for one check."""
    if depth > MAX_DEPTH:
        return "failed", {"error": f"checks nest deeper than {MAX_DEPTH}"}
    try:
        if "all" in check or "any" in check:
            mode = "all" if "all" in check else "any"
            results = [evaluate(c, view, depth + 1) for c in check[mode]]
            statuses = [s for s, _ in results]
            evidence = {mode: [{"status": s, **e} for s, e in results]}
            scored = [s for s in statuses if s != "skipped"]
            if not scored:
                return "skipped", evidence
            ok = all(s == "passed" for s in scored) if mode == "all" else "passed" in scored
            return ("passed" if ok else "failed"), evidence
        if "not" in check:
            status, evidence = evaluate(check["not"], view, depth + 1)
            if status == "skipped":
                return "skipped", {"not": evidence}
            return ("failed" if status == "passed" else "passed"), {"not": evidence}
        kind = check.get("kind")
        if kind == "state":
            return _state(check, view)
        if kind == "tool_call":
            return _tool_call(check, view)
        if kind == "response":
            return _response(check, view)
        if kind == "judge":
            return _judge(check, view)
        if kind == "side_effects":
            return _side_effects(check, view)
        return "failed", {"error": f"unknown check kind {kind!r}"}
    except (JMESPathError, UnsafeRegex, ValueError, TypeError, KeyError, RecursionError) as exc:
        return "failed", {"error": f"{type(exc).__name__}: {exc}"[:500]}


MAX_STATE_MEMO = 20_000


def _state(check: dict[str, Any], view: CheckView) -> tuple[str, dict]:
    """A state check depends on the check and the state alone: with a memo, once per pair."""
    memo = view.state_memo
    if memo is None:
        return _state_check(check, view.state)
    key = (id(check), id(view.state))
    hit = memo.get(key)
    if hit is not None and hit[0] is check and hit[1] is view.state:
        return hit[2], dict(hit[3])
    status, evidence = _state_check(check, view.state)
    if len(memo) >= MAX_STATE_MEMO:
        memo.clear()
    memo[key] = (check, view.state, status, evidence)
    return status, dict(evidence)


def _state_check(check: dict[str, Any], state: Any) -> tuple[str, dict]:
    query, op = check["query"], check["op"]
    result = run_query(query, state)
    evidence: dict[str, Any] = {"query": query, "op": op, "result": clip(result)}
    if op == "count":
        n = len(result) if isinstance(result, (list, dict)) else (0 if result is None else 1)
        evidence["count"] = n
        ok = True
        if "value" in check:
            ok = n == check["value"]
            evidence["expected"] = check["value"]
        if "min" in check:
            ok = ok and n >= check["min"]
            evidence["min"] = check["min"]
        if "max" in check:
            ok = ok and n <= check["max"]
            evidence["max"] = check["max"]
    else:
        if "value" in check:
            evidence["expected"] = check["value"]
        ok = compare(op, result, check.get("value"), bool(check.get("ignore_case")))
    return ("passed" if ok else "failed"), evidence


def _args_match(matchers: dict[str, Any], arguments: dict[str, Any]) -> bool:
    for name, matcher in matchers.items():
        actual = arguments.get(name, _MISSING)
        if isinstance(matcher, dict) and isinstance(matcher.get("op"), str):
            if not compare(
                matcher["op"], actual, matcher.get("value"), bool(matcher.get("ignore_case"))
            ):
                return False
        elif actual is _MISSING or not json_equal(actual, matcher):
            return False
    return True


def _tool_call(check: dict[str, Any], view: CheckView) -> tuple[str, dict]:
    tool = check["tool"]
    succeeded = check.get("succeeded", True)
    turn = check.get("during_turn")
    matchers = check.get("arguments") or {}
    matched = [
        c
        for c in view.calls
        if c.tool == tool
        and (c.ok or not succeeded)
        and (turn is None or c.turn == turn)
        and _args_match(matchers, c.arguments)
    ]
    evidence: dict[str, Any] = {
        "tool": tool,
        "count": len(matched),
        "matched": clip([c.brief() for c in matched]),
    }
    if check.get("called", True) is False:
        ok = not matched
    else:
        ok = check.get("min", 1) <= len(matched) <= check.get("max", len(matched))
    if ok and "before" in check:
        others = [c for c in view.calls if c.tool == check["before"] and c.ok]
        evidence["before"] = [c.seq for c in others][:20]
        ok = not others or (bool(matched) and matched[0].seq < others[0].seq)
    if ok and "after" in check:
        others = [c for c in view.calls if c.tool == check["after"] and c.ok]
        evidence["after"] = [c.seq for c in others][:20]
        ok = bool(others) and any(c.seq > others[0].seq for c in matched)
    return ("passed" if ok else "failed"), evidence


def _selected_replies(check: dict[str, Any], view: CheckView) -> list[str]:
    scope = check.get("scope", "final")
    if scope == "any":
        return [t for _, t in view.replies]
    if scope == "turn":
        turn = check.get("turn", view.last_turn)
        return [t for n, t in view.replies if n == turn]
    return [view.replies[-1][1]] if view.replies else []


def _mention_forms(value: Any) -> list[str]:
    if isinstance(value, bool):
        return [json.dumps(value)]
    if isinstance(value, int):
        return [str(value), f"{value:,}"]
    if isinstance(value, float):
        forms = [repr(value), f"{value:,}"]
        if value.is_integer():
            forms += [str(int(value)), f"{int(value):,}"]
        return forms
    return [str(value)]


def _flatten(value: Any) -> Iterable[Any]:
    if isinstance(value, list):
        for v in value:
            yield from _flatten(v)
    elif value is not None and not isinstance(value, dict) and value != "":
        yield value


def _response(check: dict[str, Any], view: CheckView) -> tuple[str, dict]:
    texts = _selected_replies(check, view)
    joined = "\n".join(texts)
    evidence: dict[str, Any] = {"scope": check.get("scope", "final"), "text": clip(joined, 1000)}
    if "contains" in check:
        evidence["contains"] = check["contains"]
        ok = normalize_text(check["contains"]) in normalize_text(joined)
    elif "matches" in check:
        evidence["matches"] = check["matches"]
        ok = any(safe_search(check["matches"], t) for t in texts)
    else:
        values = list(_flatten(run_query(check["mentions"], view.state)))[:50]
        evidence["mentions"] = check["mentions"]
        evidence["values"] = clip(values, 500)
        if not values:
            evidence["error"] = "the query found nothing to mention"
            return "failed", evidence
        text = normalize_text(joined)
        hits = [any(normalize_text(f) in text for f in _mention_forms(v)) for v in values]
        ok = all(hits) if check.get("mode", "all") == "all" else any(hits)
        evidence["mentioned"] = hits
    return ("passed" if ok else "failed"), evidence


def judge_context(check: dict[str, Any], view: CheckView) -> dict[str, Any]:
    """The context a judge check hands its judge; ``judging.judge_evidence`` cuts it to what
    the check declares the judge is shown (the state only ever holds the declared records)."""
    context = {
        "task": view.task_key,
        "scope": check.get("scope", "final"),
        "messages": json.loads(json.dumps(view.messages, default=str)),
        "final_reply": view.replies[-1][1] if view.replies else "",
        "audit": [c.brief() for c in view.calls],
        # the records each successful call changed: server-side evidence, not the agent's word
        "changes": [{"seq": c.seq, "diff": list(c.diff)} for c in view.calls if c.diff],
    }
    declared = declared_context(check.get("context"))
    if declared is not None:
        context["declared"] = declared
        context["state"] = state_of(view.state, declared["state"])
    return context


def _judge(check: dict[str, Any], view: CheckView) -> tuple[str, dict]:
    if view.judge is None:
        return "skipped", {"reason": "no judge configured"}
    context = judge_context(check, view)
    try:
        raw = view.judge(check["rubric"], context)
    except Exception as exc:  # the judge is outside code (an LLM client): contain it
        return "failed", {"error": f"judge failed: {type(exc).__name__}: {exc}"[:500]}
    reasoning, extra = None, {}
    if isinstance(raw, dict):
        reasoning = raw.get("reasoning")
        # what a judge says about its answer (a cache hit, its model) goes into the evidence
        extra = {k: raw[k] for k in ("cached", "model") if k in raw}
        raw = raw.get("score")
    if isinstance(raw, bool):
        score = 1.0 if raw else 0.0
    elif _is_number(raw):
        score = float(raw)
    else:
        return "failed", {"error": f"judge returned {type(raw).__name__}, not a score"}
    threshold = check.get("threshold", 0.5)
    evidence = {"score": score, "threshold": threshold, "reasoning": clip(reasoning, 1000), **extra}
    return ("passed" if score >= threshold else "failed"), evidence


def _side_effects(check: dict[str, Any], view: CheckView) -> tuple[str, dict]:
    if view.reference is None:
        return "failed", {
            "error": "no reference footprint: grade through runner.run_task or replay_transcript"
        }
    bad, ok = collateral(net_changes(view.calls), view.reference, check)
    evidence: dict[str, Any] = {
        "collateral": clip([c.to_dict() for c in bad], 1500),
        "collateral_count": len(bad),
        "admitted_count": len(ok),
        "reference_count": len(view.reference.changes),
    }
    return ("failed" if bad else "passed"), evidence


def leaf_kinds(check: dict[str, Any]) -> Iterable[str]:
    """The ``kind`` of every leaf in a (possibly combined) check."""
    if "all" in check or "any" in check:
        for c in check.get("all") or check.get("any") or []:
            yield from leaf_kinds(c)
    elif "not" in check:
        yield from leaf_kinds(check["not"])
    elif "kind" in check:
        yield check["kind"]
