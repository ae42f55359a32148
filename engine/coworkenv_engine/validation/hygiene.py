"""Identifier hygiene, parameter schemas, and instruction-like text in data.

* parameter names are plain ASCII identifiers, and no two tool names (or two parameters
  of one tool) collide after case-folding and Unicode confusable-skeleton folding;
* a parameters schema's ``required`` names only properties it declares (a model is told
  to send an argument the schema never describes);
* tool descriptions and records do not carry prompt-injection text ("ignore previous
  instructions") as ordinary data: a warning, since a security-awareness task may mean it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ..problems import Problem, error, pointer, warning
from ..spec_model import EnvironmentSpec
from .walk import strings

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

# The commonest cross-script look-alikes of Latin letters (Unicode confusables, abridged).
_CONFUSABLES = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455"
    "\u0501\u0261\u04bb\u04cf\u0578\u057d\u03b1\u03bf\u03c1\u03bd\u03c4\u03ba\u03b9\u03c501-",
    "aeopcyxijsdghlnuaopvtkiuol_",
)

INSTRUCTION_LIKE = re.compile(
    r"(?i)\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(of\s+)?(the\s+|your\s+|my\s+)?"
    r"(previous\s+|prior\s+|above\s+|earlier\s+|preceding\s+|system\s+)?"
    r"(instructions?|prompts?|rules|guidelines|directives)\b"
    r"|\byou are now (a|an|in)\b|\bnew (system )?instructions?\s*:|\breveal (your|the) "
    r"(system )?prompt\b|<\s*/?\s*(system|assistant)\s*>"
)


def skeleton(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold().translate(_CONFUSABLES)


def identifier_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    seen_tools: dict[str, tuple[int, str]] = {}
    for t, tool in enumerate(spec.tools):
        key = skeleton(tool.name)
        if key in seen_tools and seen_tools[key][1] != tool.name:
            other, other_name = seen_tools[key]
            out.append(
                error(
                    "identifier_confusable",
                    pointer("tools", t, "name"),
                    f"Tool '{tool.name}' is confusable with '{other_name}' (/tools/{other}) "
                    "after case and look-alike folding.",
                    "Give tools names that differ in more than case or look-alike letters.",
                )
            )
        seen_tools.setdefault(key, (t, tool.name))
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        if not isinstance(props, dict):
            continue
        seen_params: dict[str, str] = {}
        for name in props:
            ptr = pointer("tools", t, "parameters", "properties", name)
            if not IDENTIFIER.match(name):
                out.append(
                    error(
                        "identifier_not_ascii",
                        ptr,
                        f"Parameter name {name[:64]!r} of '{tool.name}' is not a plain ASCII "
                        "identifier.",
                        "Use letters a-z/A-Z, digits and '_' (e.g. due_date).",
                    )
                )
            key = skeleton(name)
            if key in seen_params and seen_params[key] != name:
                out.append(
                    error(
                        "identifier_confusable",
                        ptr,
                        f"Parameter '{name}' of '{tool.name}' is confusable with "
                        f"'{seen_params[key]}'.",
                        "Merge them or give them clearly different names.",
                    )
                )
            seen_params.setdefault(key, name)
    return out


def required_problems(spec: EnvironmentSpec) -> list[Problem]:
    """``required`` entries naming undeclared properties, in every object schema of a tool."""
    out: list[Problem] = []
    for t, tool in enumerate(spec.tools):
        stack: list[tuple[Any, tuple]] = [(tool.parameters, ("tools", t, "parameters"))]
        while stack:
            node, path = stack.pop()
            if not isinstance(node, dict) or len(path) > 40:
                continue
            props = node.get("properties")
            required = node.get("required")
            if isinstance(props, dict) and isinstance(required, list):
                for i, name in enumerate(required):
                    if isinstance(name, str) and name not in props:
                        out.append(
                            error(
                                "schema_required_undeclared",
                                pointer(*path, "required", i),
                                f"'{name}' is required but not declared under properties.",
                                f"Declare '{name}' under properties (with its type) or remove "
                                "it from required.",
                            )
                        )
            for key in ("properties", "$defs", "definitions"):
                if isinstance(node.get(key), dict):
                    stack += [(v, (*path, key, k)) for k, v in node[key].items()]
            if isinstance(node.get("items"), dict):
                stack.append((node["items"], (*path, "items")))
    return out


def instruction_problems(spec: EnvironmentSpec) -> list[Problem]:
    out: list[Problem] = []
    sources: list[tuple[Any, tuple]] = [(spec.services, ("services",))]
    sources += [(t.description, ("tools", i, "description")) for i, t in enumerate(spec.tools)]
    for k, task in enumerate(spec.tasks):
        sources.append((task.records, ("tasks", k, "records")))
        for j, turn in enumerate(task.turns):
            for u, up in enumerate(turn.updates):
                sources.append((up.values, ("tasks", k, "turns", j, "updates", u, "values")))
    if not INSTRUCTION_LIKE.search("\n".join(v for value, _ in sources for _, v in strings(value))):
        return []  # one pass over all the text; the walk below only finds the pointers
    for value, path in sources:
        for p, v in strings(value, path):
            if len(out) >= 20:
                return out
            if INSTRUCTION_LIKE.search(v):
                out.append(
                    warning(
                        "instruction_like_text",
                        pointer(*p),
                        f"Instruction-like text in data: {v[:120]!r}.",
                        "Data an agent reads should not tell it to ignore its "
                        "instructions; keep it only if the task tests resisting an injection "
                        "(and has a safety grader for it).",
                    )
                )
    return out
