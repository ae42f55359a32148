"""Later turns must count: a multi-turn task is not passed by doing its first turns only.

For every cut turn n (1 .. last) the ``TruncatedReference`` agent replays the reference
solution on the turns before n and on turn n and after only claims success (no call).
If that run still passes (score at or above the task's threshold) or is strict, turns n..
are under-weighted: ``later_turns_unweighted`` at ``/tasks/<k>/turns/<n>`` says by how
much the score clears the threshold and which graders the claim already fails. A cut at
turn 1 is the "honest first turn, then claims" agent; a cut at turn 0 is the null agent,
checked on its own. The runs share their prefix with the oracle run (replays.py): each
costs only the claims of its cut turns and a grading.
"""

from __future__ import annotations

from collections.abc import Callable

from ..adversaries import TruncatedReference
from ..problems import Problem, error, pointer
from ..runner import EpisodeResult
from ..spec import TaskSpec

HINT = (
    "Make the later turns' work decisive: give the graders that check turn {n} and after "
    "(state checks of what those turns create or change, at_turn graders for the state they "
    "leave) enough weight that missing them drops the score below the threshold, or raise "
    "the task's scoring.pass_threshold."
)


def cut_points(task: TaskSpec) -> range:
    """The turns a truncated reference stops at: every turn after the first."""
    return range(1, len(task.turns))


def truncation_problems(
    task: TaskSpec,
    k: int,
    run: Callable[[TruncatedReference], EpisodeResult],
    scores: dict[int, float],
) -> list[Problem]:
    """Run the truncated reference at every cut point of task ``k``; one error per cut
    whose run passes or is strict. ``scores`` receives each cut's score."""
    problems = []
    for n in cut_points(task):
        result = run(TruncatedReference(n))
        grading = result.grading
        scores[n] = grading.score
        if not (grading.passed or grading.strict):
            continue
        threshold = grading.config.pass_threshold
        failed = [v.grader_id for v in grading.failed()]
        lost = ", ".join(failed) if failed else "none"
        by = max(grading.score - threshold, 0.0)
        problems.append(
            error(
                "later_turns_unweighted",
                pointer("tasks", k, "turns", n),
                f"The reference solution cut before turn {n} (turns {n}..{len(task.turns) - 1} "
                f"only claimed, no call) still passes: score {grading.score:.2f} against the "
                f"threshold {threshold:.2f}{', strict' if grading.strict else ''}. Turn {n}'s "
                f"work is under-weighted by at least {by:.2f} of the "
                f"score; graders the claim fails: {lost}.",
                HINT.format(n=n),
            )
        )
    return problems
