"""The ``coworkenv.environment/v1`` document: JSON Schema, typed loader, canonical form, hash."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from .attachments import Attachment
from .problems import SpecError
from .spec_model import (
    ALL_FAULT_KINDS,
    DEFAULT_CLOCK_START,
    DEFAULT_STEP_SECONDS,
    Binding,
    Clock,
    EnvironmentSpec,
    Faults,
    Grader,
    ReferenceCall,
    ReferenceStep,
    TaskScoring,
    TaskSpec,
    ToolSpec,
    Turn,
    Update,
    UserSpec,
)
from .spec_schema import schema_problems, spec_json_schema

__all__ = [
    "SCHEMA_ID",
    "Binding",
    "Clock",
    "EnvironmentSpec",
    "Faults",
    "Grader",
    "ReferenceCall",
    "ReferenceStep",
    "TaskScoring",
    "TaskSpec",
    "ToolSpec",
    "Turn",
    "Update",
    "UserSpec",
    "canonical_dump",
    "canonical_hash",
    "canonical_json",
    "load_canonical",
    "load_spec",
    "parse_spec",
    "schema_problems",
    "spec_hash",
    "spec_json_schema",
]

SCHEMA_ID = "coworkenv.environment/v1"


# --------------------------------------------------------------------------- loading


def parse_spec(doc: Any) -> EnvironmentSpec:
    """Schema-validate and build the typed spec, without semantic (static) checks."""
    problems = schema_problems(doc)
    if problems:
        raise SpecError(problems)
    return _build(doc)


def load_spec(doc: Any) -> EnvironmentSpec:
    """Schema + static validation; raises SpecError with every error-severity problem."""
    if isinstance(doc, EnvironmentSpec):
        return doc
    spec = parse_spec(doc)
    from .validation.static import static_problems  # the validator imports this module

    errors = [p for p in static_problems(doc, spec) if p.severity == "error"]
    if errors:
        raise SpecError(errors)
    return spec


def load_canonical(
    doc: Any, *, certified_hash: str | None = None
) -> tuple[dict[str, Any], EnvironmentSpec]:
    """``(canonical_dump(doc), load_spec(canonical_dump(doc)))`` with one schema pass
    instead of two: the canonical dump of a schema-valid document is schema-valid (it only
    makes defaults explicit), so the spec is built from it without validating it again. The
    static checks run on the canonical document, as ``load_spec`` would run them.

    ``certified_hash``: the canonical hash of a document a whole validation accepted (which
    ran the schema pass and the static checks on it). A document whose canonical form has
    that hash is that document, and is built without them; any other goes the whole way."""
    if certified_hash:
        certified = _certified(doc, certified_hash)
        if certified is not None:
            return certified
    canonical = _normalize_numbers(_dump_env(parse_spec(doc)))
    spec = _build(canonical)
    from .validation.static import static_problems  # the validator imports this module

    errors = [p for p in static_problems(canonical, spec) if p.severity == "error"]
    if errors:
        raise SpecError(errors)
    return canonical, spec


def _certified(doc: Any, certified_hash: str) -> tuple[dict[str, Any], EnvironmentSpec] | None:
    try:
        canonical = _normalize_numbers(_dump_env(_build(doc)))
    except Exception:  # not even buildable unchecked: the whole way says why
        return None
    if canonical_hash(canonical) != certified_hash:
        return None
    return canonical, _build(canonical)


def _copy(value: Any) -> Any:
    """A deep copy of JSON data (several times faster than copy.deepcopy)."""
    return json.loads(json.dumps(value))


def _build(doc: dict[str, Any]) -> EnvironmentSpec:
    clock = doc.get("clock") or {}
    return EnvironmentSpec(
        name=doc["name"],
        domain=doc.get("domain", ""),
        description=doc.get("description", ""),
        clock=Clock(
            clock.get("start", DEFAULT_CLOCK_START),
            clock.get("step_seconds", DEFAULT_STEP_SECONDS),
        ),
        services=_copy(doc["services"]),
        tools=tuple(_build_tool(t) for t in doc["tools"]),
        tasks=tuple(_build_task(t) for t in doc["tasks"]),
        metadata=_copy(doc.get("metadata", {})),
        attachments=tuple(Attachment.of(a) for a in doc.get("attachments", ())),
    )


def _build_tool(t: dict[str, Any]) -> ToolSpec:
    b = t["binding"]
    faults = t.get("faults") or {}
    return ToolSpec(
        name=t["name"],
        description=t.get("description", ""),
        parameters=_copy(t["parameters"]),
        binding=Binding(
            op=b["op"],
            service=b["service"],
            collection=b["collection"],
            fields=tuple(b["fields"]) if "fields" in b else None,
            query=b.get("query"),
            id=b.get("id"),
            values=_copy(b["values"]) if "values" in b else None,
            merge=b.get("merge"),
            where=_copy(b["where"]) if "where" in b else None,
            limit=b.get("limit"),
            attachment=b.get("attachment"),
        ),
        faults=Faults(float(faults.get("rate", 0.0)), tuple(faults.get("kinds", ALL_FAULT_KINDS))),
    )


def _build_task(t: dict[str, Any]) -> TaskSpec:
    user = t.get("user") or {}
    scoring = t.get("scoring")
    return TaskSpec(
        key=t["key"],
        title=t.get("title", ""),
        capabilities=tuple(t.get("capabilities", ())),
        split=t.get("split", "train"),
        system=t.get("system", ""),
        constraints=tuple(t.get("constraints", ())),
        records=_copy(t.get("records", {})),
        user=UserSpec(user.get("persona", ""), tuple(user.get("reveals_when_asked", ()))),
        turns=tuple(
            Turn(
                message=turn["message"],
                updates=tuple(
                    Update(
                        op=u["op"],
                        service=u["service"],
                        collection=u["collection"],
                        id=u.get("id"),
                        values=_copy(u["values"]) if "values" in u else None,
                        silent=u.get("silent", False),
                        notice=u.get("notice"),
                    )
                    for u in turn.get("updates", ())
                ),
                time=turn.get("time"),
            )
            for turn in t["turns"]
        ),
        reference_solution=tuple(
            ReferenceStep(
                turn=s["turn"],
                calls=tuple(ReferenceCall(c["tool"], _copy(c["arguments"])) for c in s["calls"]),
                reply=s.get("reply"),
            )
            for s in t["reference_solution"]
        ),
        graders=tuple(
            Grader(
                id=g["id"],
                category=g["category"],
                check=_copy(g["check"]),
                description=g.get("description", ""),
                weight=g.get("weight", 1.0),
                at_turn=g.get("at_turn"),
                capability=g.get("capability"),
            )
            for g in t["graders"]
        ),
        scoring=TaskScoring(**scoring) if scoring is not None else None,
        metadata=_copy(t.get("metadata", {})),
    )


# --------------------------------------------------------------------------- canonical form


def _dump_env(spec: EnvironmentSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": SCHEMA_ID,
        "name": spec.name,
        "domain": spec.domain,
        "description": spec.description,
        "clock": {"start": spec.clock.start, "step_seconds": spec.clock.step_seconds},
        "services": (spec.services),
        "tools": [_dump_tool(t) for t in spec.tools],
        "tasks": [_dump_task(t) for t in spec.tasks],
        "metadata": (spec.metadata),
    }
    if spec.attachments:  # only when there are some: older documents keep their hash
        out["attachments"] = [a.to_dict() for a in spec.attachments]
    return out


def _dump_tool(t: ToolSpec) -> dict[str, Any]:
    b = t.binding
    binding: dict[str, Any] = {"op": b.op, "service": b.service, "collection": b.collection}
    for name in ("fields", "query", "id", "values", "merge", "where", "limit", "attachment"):
        value = getattr(b, name)
        if value is not None:
            binding[name] = list(value) if name == "fields" else (value)
    return {
        "name": t.name,
        "description": t.description,
        "parameters": (t.parameters),
        "binding": binding,
        "faults": {"rate": t.faults.rate, "kinds": list(t.faults.kinds)},
    }


def _dump_update(u: Update) -> dict[str, Any]:
    out: dict[str, Any] = {"op": u.op, "service": u.service, "collection": u.collection}
    if u.id is not None:
        out["id"] = u.id
    if u.values is not None:
        out["values"] = u.values
    out["silent"] = u.silent
    out["notice"] = u.notice
    return out


def _dump_task(t: TaskSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": t.key,
        "title": t.title,
        "capabilities": list(t.capabilities),
        "split": t.split,
        "system": t.system,
        "constraints": list(t.constraints),
        "records": (t.records),
        "user": {"persona": t.user.persona, "reveals_when_asked": list(t.user.reveals_when_asked)},
        "turns": [
            {
                "time": turn.time,
                "updates": [_dump_update(u) for u in turn.updates],
                "message": turn.message,
            }
            for turn in t.turns
        ],
        "reference_solution": [
            {
                "turn": s.turn,
                "calls": [{"tool": c.tool, "arguments": (c.arguments)} for c in s.calls],
                "reply": s.reply,
            }
            for s in t.reference_solution
        ],
        "graders": [_grader_dump(g) for g in t.graders],
    }
    if t.scoring is not None:
        out["scoring"] = {
            k: v
            for k, v in (
                ("completion_weight", t.scoring.completion_weight),
                ("robustness_weight", t.scoring.robustness_weight),
                ("pass_threshold", t.scoring.pass_threshold),
            )
            if v is not None
        }
    out["metadata"] = t.metadata
    return out


def _grader_dump(g: Grader) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": g.id,
        "description": g.description,
        "category": g.category,
        "weight": g.weight,
        "at_turn": g.at_turn,
    }
    if g.capability is not None:  # only when set: older documents keep their hash
        out["capability"] = g.capability
    out["check"] = g.check
    return out


def canonical_dump(doc_or_spec: dict[str, Any] | EnvironmentSpec) -> dict[str, Any]:
    """The normalized document: every default explicit, keys in a fixed order.

    ``canonical_dump(canonical_dump(d)) == canonical_dump(d)`` and documents that differ
    only in omitted defaults dump identically. Raises SpecError when not schema-valid.
    """
    spec = doc_or_spec if isinstance(doc_or_spec, EnvironmentSpec) else parse_spec(doc_or_spec)
    return _normalize_numbers(_dump_env(spec))


def _normalize_numbers(value: Any) -> Any:
    """Integral floats become ints, so 2 and 2.0 (e.g. after a database trip) hash alike."""
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: _normalize_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize_numbers(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Sorted keys, compact separators, UTF-8 text, integral floats as ints."""
    return json.dumps(
        _normalize_numbers(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def canonical_hash(canonical: dict[str, Any]) -> str:
    """``spec_hash`` of a document that is already canonical (``canonical_dump``'s output,
    which it returns unchanged), without schema-validating it again."""
    return hashlib.sha256(canonical_json(canonical).encode("utf-8", "surrogatepass")).hexdigest()


def spec_hash(doc_or_spec: Any) -> str:
    """sha256 of the canonical dump; of the raw canonical JSON when not schema-valid."""
    try:
        body = canonical_dump(doc_or_spec)
    except SpecError:
        body = doc_or_spec
    # surrogatepass: a hash is total over any string (the validator reports lone surrogates)
    return hashlib.sha256(canonical_json(body).encode("utf-8", "surrogatepass")).hexdigest()
