"""From the review decisions (the curation services) to the exported rows: rejected and
pending demonstrations never reach a version; a correction's excluded turn becomes OpenAI
``weight: 0``, a TRL ``weight`` of 0 and a ShareGPT ``"loss": false``."""

import json

from apps.curation.models import Decision, Demonstration, DemonstrationStatus
from apps.curation.services.corrections import demonstration_correct
from apps.curation.services.reviews import demonstration_review
from apps.datasets.models import DatasetRow
from apps.datasets.services import export_absolute_path, export_lines
from tests.datasets.conftest import build_version, make_demonstration, oracle_transcript, variant


def test_review_decisions_decide_what_enters(dataset, author, reviewer, sample_environments):
    env = sample_environments[0]
    transcript, tools, score = oracle_transcript(env, "book-q3-review")
    demos = [
        make_demonstration(
            env,
            "book-q3-review",
            transcript=variant(transcript, take),
            tools=tools,
            score=score,
            status=DemonstrationStatus.PENDING,
        )
        for take in range(4)
    ]
    approved, rejected, corrected, untouched = demos
    demonstration_review(demonstration=approved, user=reviewer, decision=Decision.APPROVED)
    demonstration_review(
        demonstration=rejected,
        user=reviewer,
        decision=Decision.REJECTED,
        comment="Booked the wrong Dana.",
    )
    # Exclude the first tool call from training, then approve the corrected version.
    version = demonstration_correct(
        demonstration=corrected,
        user=reviewer,
        edits=[{"op": "weight", "index": 2, "weight": 0}],
        note="First search was clumsy.",
    )
    corrected.refresh_from_db()
    assert corrected.current_version == version and version.number == 2
    demonstration_review(demonstration=corrected, user=reviewer, decision=Decision.APPROVED)
    statuses = dict(Demonstration.objects.values_list("pk", "status"))
    assert statuses == {
        approved.pk: "approved",
        rejected.pk: "rejected",
        corrected.pk: "approved",
        untouched.pk: "pending",
    }

    built = build_version(dataset, author, validation_fraction=0)
    rows = DatasetRow.objects.filter(version=built)
    assert dict(rows.values_list("demonstration_id", "demonstration_version_id")) == {
        approved.pk: approved.current_version_id,
        corrected.pk: version.pk,  # the correction, not the original
    }
    by_format = {}
    jsonl = built.exports.filter(split="train", status="ready").exclude(
        format__in=["card", "trl_parquet"]
    )
    for export in jsonl:
        lines = export_absolute_path(export).read_text().splitlines()
        by_format[export.format] = [json.loads(line) for line in lines]
    # OpenAI refuses the train split (2 rows < 10) but TRL and ShareGPT carry the weights.
    assert built.exports.get(format="openai", split="train").status == "invalid"
    trl_weights = sorted(
        tuple(m.get("weight") for m in row["messages"] if m["role"] == "assistant")[:1]
        for row in by_format["trl"]
    )
    assert trl_weights == [(0,), (1,)]
    losses = sorted(row["conversations"][1].get("loss", True) for row in by_format["sharegpt"])
    assert losses == [False, True]
    # The OpenAI rows carry it too (the file itself is refused below OpenAI's minimum of 10).
    openai_rows = [json.loads(line) for line, _ in export_lines(built, "openai", "train")]
    weights = sorted(row["messages"][2]["weight"] for row in openai_rows)
    assert weights == [0, 1]
