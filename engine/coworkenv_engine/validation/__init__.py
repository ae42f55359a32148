"""Validate a spec: schema, static checks, then dynamic checks in the simulator.

``validate_spec`` never raises on any JSON value; every finding is a Problem with a code,
a JSON pointer into the document, a message and a hint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..attachments import Resolver
from ..bounds import loads_document
from ..checks import Judge
from ..problems import Problem, error, has_errors
from ..spec import EnvironmentSpec, _build, schema_problems, spec_hash
from .attachments import attachment_content_problems
from .budget import DEFAULT_TIME_BUDGET_S, Deadline, as_deadline
from .dynamic import TaskReport, validate_task
from .entity import side_effects_scope_problems
from .faults import budget_problems
from .gameable import gameable_problems
from .judges import judge_problems
from .static import static_problems

__all__ = [
    "DEFAULT_TIME_BUDGET_S",
    "Deadline",
    "TaskReport",
    "ValidationReport",
    "validate_spec",
    "validate_text",
]

Progress = Callable[[int, int, str], None]


@dataclass
class ValidationReport:
    problems: list[Problem] = field(default_factory=list)
    tasks: list[TaskReport] = field(default_factory=list)
    spec_hash: str | None = None
    dynamic: bool = True
    # The typed spec built from the document once it passed the schema (None before): a
    # caller that stores the document hands it on (e.g. to environment_import) instead of
    # schema-validating the same document again. Not part of to_dict().
    spec: EnvironmentSpec | None = field(default=None, repr=False, compare=False)

    @property
    def valid(self) -> bool:
        return not has_errors(self.problems)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def task(self, key: str) -> TaskReport:
        return next(t for t in self.tasks if t.key == key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "spec_hash": self.spec_hash,
            "dynamic": self.dynamic,
            "summary": {"errors": len(self.errors), "warnings": len(self.warnings)},
            "problems": [p.to_dict() for p in self.problems],
            "tasks": [t.to_dict() for t in self.tasks],
        }


def _raw_hash(doc: Any) -> str | None:
    try:
        return spec_hash(doc)
    except (TypeError, ValueError, RecursionError):
        return None


def _crash(where: str, exc: BaseException) -> Problem:
    return error(
        "simulation_crashed",
        where,
        f"Validation failed unexpectedly: {type(exc).__name__}: {exc}"[:500],
        "This is an engine bug; report it with the spec.",
    )


def validate_spec(
    doc: Any,
    *,
    dynamic: bool = True,
    on_progress: Progress | None = None,
    judge: Judge | None = None,
    attachments: Resolver | None = None,
    time_budget: float | Deadline | None = DEFAULT_TIME_BUDGET_S,
) -> ValidationReport:
    """``attachments``, when given, fetches an attachment's bytes by sha256 (None when it is
    not stored): each listed attachment is then checked against its stored file.

    ``time_budget`` (seconds of wall clock, or a ``Deadline``; None = unbounded) is a
    backstop for the whole validation: past it the dynamic checks stop with
    ``validation_time_budget_exceeded`` at the task being validated."""
    report = ValidationReport(dynamic=dynamic)
    deadline = as_deadline(time_budget)

    def progress(done: int, total: int, label: str) -> None:
        if on_progress is not None:
            on_progress(done, total, label)

    try:
        report.problems.extend(schema_problems(doc))
        if report.problems:
            report.spec_hash = _raw_hash(doc)
            progress(1, 1, "schema")
            return report
        spec: EnvironmentSpec = _build(doc)
        report.spec = spec
        report.spec_hash = spec_hash(spec)
        report.problems.extend(static_problems(doc, spec))
        if attachments is not None:
            report.problems.extend(attachment_content_problems(spec, attachments))
        runnable = report.valid
        if runnable:  # gameable graders: quality rules, not load errors (load_spec)
            for k, task in enumerate(spec.tasks):
                report.problems.extend(gameable_problems(spec, k, task))
                report.problems.extend(side_effects_scope_problems(spec, k, task))
                report.problems.extend(judge_problems(spec, k, task))
    except RecursionError as exc:
        report.problems.append(
            error(
                "schema_invalid",
                "",
                f"The document nests too deeply ({exc}).",
                "Flatten the document.",
            )
        )
        return report
    except Exception as exc:  # never raise on garbage: report it instead
        report.problems.append(_crash("", exc))
        return report
    total = 1 + (len(spec.tasks) if dynamic else 0)
    progress(1, total, "static")
    if dynamic and runnable:
        over = budget_problems(spec)
        report.problems.extend(over)
        runnable = not over
    if not dynamic or not runnable:
        report.tasks = [TaskReport(t.key) for t in spec.tasks]
        return report
    out_of_time = False
    for k, task in enumerate(spec.tasks):
        if out_of_time:  # the budget is spent: the tasks after are not validated
            report.tasks.append(TaskReport(task.key))
            continue
        try:
            task_report, problems = validate_task(spec, k, judge, deadline)
        except Exception as exc:  # a crash on one task must not hide the others
            task_report, problems = TaskReport(task.key), [_crash(f"/tasks/{k}", exc)]
        out_of_time = any(p.code == "validation_time_budget_exceeded" for p in problems)
        report.tasks.append(task_report)
        report.problems.extend(problems)
        progress(2 + k, total, f"task {task.key}")
    return report


def validate_text(
    text: str | bytes,
    *,
    dynamic: bool = True,
    on_progress: Progress | None = None,
    judge: Judge | None = None,
    attachments: Resolver | None = None,
    time_budget: float | Deadline | None = DEFAULT_TIME_BUDGET_S,
) -> ValidationReport:
    """Validate JSON text: bounds (size, depth, duplicate keys) are checked while parsing,
    before anything recurses. Raises ``bounds.DocumentUnreadable`` when it is not JSON."""
    doc, bounds = loads_document(text)
    if bounds:
        return ValidationReport(problems=bounds, dynamic=dynamic)
    return validate_spec(
        doc,
        dynamic=dynamic,
        on_progress=on_progress,
        judge=judge,
        attachments=attachments,
        time_budget=time_budget,
    )
