"""Static validation of graders and their checks: queries, regexes, tools, turns and
bounds."""

from __future__ import annotations

import json
from typing import Any

from ..checks import MAX_DEPTH, leaf_kinds
from ..problems import Problem, error, pointer
from ..safe_regex import check_pattern
from .queries import analyze_query


class CheckContext:
    def __init__(self, spec, task, collections, fields):
        self.spec, self.task, self.collections, self.fields = spec, task, collections, fields

    def fields_of(self, service: str, collection: str) -> set[str] | None:
        return self.fields.get((service, collection))


def _query(out: list[Problem], ptr: str, query: str, ctx: CheckContext) -> None:
    for issue in analyze_query(query, ctx.collections, ctx.fields_of):
        out.append(error(issue.code, ptr, issue.message, issue.hint))


def _regex(out: list[Problem], ptr: str, pattern: Any) -> None:
    if not isinstance(pattern, str):
        return
    why = check_pattern(pattern)
    if why is None:
        return
    code = "regex_invalid" if why.startswith("does not compile") else "regex_unsafe"
    out.append(
        error(
            code,
            ptr,
            f"Regex {json.dumps(pattern)[:120]} {why}.",
            "Use a simple pattern: no nested or repeated groups of quantifiers, no "
            "back-references, at most 300 characters.",
        )
    )


def _bounds(out: list[Problem], ptr: str, check: dict[str, Any]) -> None:
    if "min" in check and "max" in check and check["min"] > check["max"]:
        out.append(
            error(
                "check_invalid",
                ptr + "/min",
                f"min {check['min']} > max {check['max']}.",
                "Swap or fix the bounds.",
            )
        )


def _scope_name(out: list[Problem], ptr: str, name: str, ctx: CheckContext) -> None:
    service, _, collection = name.partition(".")
    if service not in ctx.collections:
        out.append(
            error(
                "unknown_service",
                ptr,
                f"Service '{service}' does not exist.",
                f"Use one of: {', '.join(sorted(ctx.collections)) or 'none'}.",
            )
        )
    elif collection and collection not in ctx.collections[service]:
        out.append(
            error(
                "unknown_collection",
                ptr,
                f"Collection '{service}.{collection}' does not exist.",
                f"Collections of '{service}': {', '.join(sorted(ctx.collections[service]))}.",
            )
        )


def _side_effects_scope(
    out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext
) -> None:
    for key in ("services", "ignore"):
        for i, name in enumerate(check.get(key) or []):
            _scope_name(out, f"{ptr}/{key}/{i}", name, ctx)
    for i, entry in enumerate(check.get("allow") or []):
        name = entry["service"] + (f".{entry['collection']}" if "collection" in entry else "")
        _scope_name(out, f"{ptr}/allow/{i}", name, ctx)


def grader_problems(out: list[Problem], k: int, ctx: CheckContext) -> None:
    """Task ``k``'s graders: ids, weights, turns and checks, and a deterministic completion
    grader among them."""
    task = ctx.task
    n_turns = len(task.turns)
    seen_graders: set[str] = set()
    deterministic_completion = False
    for g, grader in enumerate(task.graders):
        ptr = pointer("tasks", k, "graders", g)
        if grader.id in seen_graders:
            out.append(
                error(
                    "duplicate_id",
                    ptr + "/id",
                    f"Grader id '{grader.id}' is used twice in the task.",
                    "Give each grader its own id.",
                )
            )
        seen_graders.add(grader.id)
        if not grader.weight > 0:
            out.append(
                error(
                    "weight_not_positive",
                    ptr + "/weight",
                    f"Weight {grader.weight} is not positive.",
                    "Use a weight > 0 (e.g. 1 or 2).",
                )
            )
        _turn_in_range(out, ptr, "at_turn", grader.at_turn, n_turns)
        check_problems(out, ptr + "/check", grader.check, ctx)
        kinds = set(leaf_kinds(grader.check))
        if grader.category == "completion" and kinds - {"judge"}:
            deterministic_completion = True
    if not deterministic_completion:
        out.append(
            error(
                "no_completion_check",
                pointer("tasks", k, "graders"),
                f"Task '{task.key}' has no deterministic completion grader.",
                "Add a completion grader with a state, tool_call or response check.",
            )
        )


def check_problems(
    out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext, depth: int = 0
) -> None:
    if depth > MAX_DEPTH:
        out.append(
            error(
                "check_invalid",
                ptr,
                f"Checks nest deeper than {MAX_DEPTH}.",
                "Flatten the all/any/not combinators.",
            )
        )
        return
    for mode in ("all", "any"):
        if mode in check:
            for i, child in enumerate(check[mode]):
                check_problems(out, f"{ptr}/{mode}/{i}", child, ctx, depth + 1)
            return
    if "not" in check:
        check_problems(out, ptr + "/not", check["not"], ctx, depth + 1)
        return
    leaf = _LEAF_CHECKS.get(check["kind"])
    if leaf is not None:
        leaf(out, ptr, check, ctx)


def _state_check(out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext) -> None:
    _query(out, ptr + "/query", check["query"], ctx)
    if check["op"] == "matches":
        _regex(out, ptr + "/value", check["value"])
    _bounds(out, ptr, check)


def _tool_call_check(
    out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext
) -> None:
    tool = ctx.spec.tool(check["tool"])
    names = ", ".join(t.name for t in ctx.spec.tools) or "none"
    if tool is None:
        out.append(
            error(
                "unknown_tool",
                ptr + "/tool",
                f"The check looks for calls to '{check['tool']}', which is not declared.",
                f"Use one of: {names}.",
            )
        )
    for rel in ("before", "after"):
        if rel in check and ctx.spec.tool(check[rel]) is None:
            out.append(
                error(
                    "unknown_tool",
                    f"{ptr}/{rel}",
                    f"'{rel}' names '{check[rel]}', which is not declared.",
                    f"Use one of: {names}.",
                )
            )
    _argument_matchers(out, ptr, check, tool)
    _turn_in_range(out, ptr, "during_turn", check.get("during_turn"), len(ctx.task.turns))
    _bounds(out, ptr, check)


def _argument_matchers(out: list[Problem], ptr: str, check: dict[str, Any], tool: Any) -> None:
    """Each matched argument is a parameter of the tool (when it declares them), and a
    ``matches`` matcher's regex is sound."""
    props = tool.parameters.get("properties") if tool else None
    declared = set(props) if isinstance(props, dict) else set()
    for arg, matcher in (check.get("arguments") or {}).items():
        if tool is not None and isinstance(props, dict) and arg not in declared:
            out.append(
                error(
                    "unknown_argument",
                    f"{ptr}/arguments/{arg}",
                    f"'{arg}' is not a parameter of '{tool.name}'.",
                    f"Parameters: {', '.join(sorted(declared)) or 'none'}.",
                )
            )
        if isinstance(matcher, dict) and matcher.get("op") == "matches":
            _regex(out, f"{ptr}/arguments/{arg}/value", matcher.get("value"))


def _response_check(out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext) -> None:
    if "matches" in check:
        _regex(out, ptr + "/matches", check["matches"])
    if "mentions" in check:
        _query(out, ptr + "/mentions", check["mentions"], ctx)
    _turn_in_range(out, ptr, "turn", check.get("turn"), len(ctx.task.turns))


def _judge_check(out: list[Problem], ptr: str, check: dict[str, Any], ctx: CheckContext) -> None:
    """A declared context names collections that exist, shows the judge something, and
    shows it every reply when the scope asks for them all."""
    context = check.get("context")
    if not isinstance(context, dict):
        return
    for i, name in enumerate(context.get("state") or []):
        _scope_name(out, f"{ptr}/context/state/{i}", name, ctx)
    messages = context.get("messages", "all")
    if messages == "none" and context.get("calls") is False and not context.get("state"):
        out.append(
            error(
                "check_invalid",
                ptr + "/context",
                "The judge is shown nothing: no message, no call, no state.",
                "Declare what the rubric is judged on: messages, calls or state collections.",
            )
        )
    if check.get("scope") == "all" and messages in ("final", "none"):
        out.append(
            error(
                "check_invalid",
                ptr + "/context/messages",
                f"The scope 'all' grades every reply, but the judge is shown "
                f"{'only the last' if messages == 'final' else 'no message'}.",
                "Show it the replies ('assistant' or 'all'), or grade the final reply "
                "(scope 'final').",
            )
        )


_LEAF_CHECKS = {
    "state": _state_check,
    "tool_call": _tool_call_check,
    "side_effects": _side_effects_scope,
    "response": _response_check,
    "judge": _judge_check,
}


def _turn_in_range(out: list[Problem], ptr: str, key: str, turn: int | None, n_turns: int) -> None:
    """``key`` (``turn``, ``at_turn``, ``during_turn``) names one of the task's turns."""
    if turn is not None and turn >= n_turns:
        out.append(
            error(
                "turn_out_of_range",
                f"{ptr}/{key}",
                f"{key} {turn} but the task has {_turns(n_turns)}.",
                f"Use 0..{n_turns - 1}.",
            )
        )


def _turns(n: int) -> str:
    return f"{n} turn" if n == 1 else f"{n} turns"
