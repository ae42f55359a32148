"""Which validation rows a supervised job evaluates on (``sft.run``).

A version's validation split can show images when its training split shows none (its
groups with view tools all went to validation). A text model cannot read them, and training
a vision model for the sake of evaluation is not what was asked: the job evaluates on the
split's text rows, and says what it left out and what to change when none is left.
"""

from __future__ import annotations

from typing import Any

from apps.training.vision import has_images, tiny_vlm_base


def evaluation_rows(
    train_rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]], base: str
) -> tuple[list[dict[str, Any]], str]:
    """The rows to evaluate on and a note for the job's log ("" when nothing was left out):
    with text training rows (and no vision preset), the validation rows that show images
    are left out."""
    if has_images(train_rows) or tiny_vlm_base(base) or not has_images(eval_rows):
        return eval_rows, ""
    kept = [row for row in eval_rows if not row.get("images")]
    note = (
        f"{len(eval_rows) - len(kept)} of {len(eval_rows)} validation rows show images and "
        "no training row does: they are left out of evaluation (a text model cannot read "
        "them)"
    )
    if kept:
        return kept, note + "."
    return kept, note + (
        "; no validation row is left, so this job reports no eval loss. To evaluate, rebuild "
        "the version with text rows in validation (demonstrations from more environments, "
        "or another seed), or train a vision-language model on rows with images."
    )
