"""Building, rebuilding and verifying dataset versions through their jobs."""

import json

import pytest

from apps.core.exceptions import ApplicationError
from apps.core.models import Job, JobStatus
from apps.curation.models import DemonstrationStatus
from apps.datasets.models import (
    DatasetExport,
    DatasetRow,
    DatasetVersion,
    ExportStatus,
    VersionStatus,
)
from apps.datasets.services import (
    VersionFilter,
    dataset_version_build_job,
    dataset_version_create,
    dataset_version_rebuild,
    dataset_version_verify_job,
    dataset_version_verify_start,
)
from apps.datasets.services.exports import export_absolute_path
from tests.datasets.conftest import build_version, make_demonstration, oracle_transcript

build = build_version


def test_a_version_splits_by_environment(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    assert version.status == VersionStatus.READY
    assert version.job.status == JobStatus.SUCCEEDED
    assert (version.demonstrations, version.excluded_eval, version.removed_duplicates) == (21, 3, 0)
    assert version.train_rows + version.validation_rows == 18
    sides = {}
    for row in DatasetRow.objects.filter(version=version):
        sides.setdefault(row.environment_key, set()).add(row.split)
    assert len(sides) == 3
    assert all(len(splits) == 1 for splits in sides.values())
    assert {split for splits in sides.values() for split in splits} == {"train", "validation"}
    env_rows = {env["key"]: env for env in version.environments}
    assert {env["split"] for env in env_rows.values()} == {"train", "validation"}
    assert version.validation_rows == 6  # one of the three environments (6 train-task rows each)


def test_eval_tasks_never_enter(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    eval_ids = {d.pk for d in approved_demonstrations if d.split == "eval"}
    assert len(eval_ids) == 3
    assert not DatasetRow.objects.filter(version=version, demonstration_id__in=eval_ids).exists()
    # …not even through a demonstration recorded as train whose task is now marked eval.
    demo = next(d for d in approved_demonstrations if d.split == "train")
    demo.task.split = "eval"
    demo.task.save(update_fields=["split"])
    again = build(dataset, author)
    assert again.excluded_eval == 3 + 3  # the three takes of that task
    assert not DatasetRow.objects.filter(version=again, demonstration=demo).exists()
    eval_requests = {
        json.dumps(_first_user_message(d), ensure_ascii=False)[1:-1]
        for d in approved_demonstrations
        if d.split == "eval" or d.task_id == demo.task_id
    }
    assert len(eval_requests) == 4
    exports = DatasetExport.objects.filter(version=again, status=ExportStatus.READY)
    # Which environments go to validation follows the seed and their spec hashes, so a
    # split can end up under OpenAI's 10-example minimum: that export is then refused, and
    # the refusal is the only reason an export may be missing.
    refused = DatasetExport.objects.filter(version=again).exclude(status=ExportStatus.READY)
    assert all(
        export.format == "openai" and export.split == "train" and export.rows < 10
        for export in refused
    ), [(e.format, e.split, e.rows, e.lint) for e in refused]
    assert exports.count() + refused.count() == 13
    for export in exports.exclude(format="trl_parquet"):  # the trl rows, compressed
        text = export_absolute_path(export).read_text()
        assert not any(request in text for request in eval_requests), export


def _first_user_message(demonstration) -> str:
    transcript = demonstration.current_version.transcript
    return next(m["content"] for m in transcript if m["role"] == "user")


def test_rebuild_has_the_same_checksum_and_rows(dataset, author, approved_demonstrations):
    first = build(dataset, author, seed=7)
    second = dataset_version_rebuild(version=first, user=author)
    dataset_version_build_job(second.job_id)
    second.refresh_from_db()
    assert second.number == 2
    assert second.rebuilt_from == first
    assert len(first.checksum) == 64
    assert second.checksum == first.checksum
    rows = lambda v: list(  # noqa: E731
        DatasetRow.objects.filter(version=v)
        .order_by("split", "position")
        .values_list("split", "position", "demonstration_id", "demonstration_version_id")
    )
    assert rows(first) == rows(second)
    assert "checksum matches v1" in second.job.message
    # Another seed: another shuffle (and maybe another split), another checksum.
    other = build(dataset, author, seed=8)
    assert other.checksum != first.checksum


def test_exact_duplicates_are_removed(dataset, author, sample_environments):
    env = sample_environments[0]
    transcript, tools, _score = oracle_transcript(env, "book-q3-review")
    original = make_demonstration(env, "book-q3-review", transcript=transcript, tools=tools)
    # The same transcript with other call ids and other argument spacing is a duplicate.
    copy = json.loads(json.dumps(transcript))
    for message in copy:
        for call in message.get("tool_calls") or []:
            call["id"] = call["id"].replace("call_", "tc-")
            call["function"]["arguments"] = json.dumps(
                json.loads(call["function"]["arguments"]), indent=2
            )
        if message["role"] == "tool":
            message["tool_call_id"] = message["tool_call_id"].replace("call_", "tc-")
    make_demonstration(env, "book-q3-review", transcript=copy, tools=tools)
    version = build(dataset, author)
    assert version.removed_duplicates == 1
    kept = set(
        DatasetRow.objects.filter(version=version).values_list("demonstration_id", flat=True)
    )
    assert kept == {original.pk}


def _correct(demonstration, transcript):
    """A reviewer's correction: the demonstration's next version becomes its current one."""
    from apps.curation.models import DemonstrationVersion

    first = demonstration.current_version
    corrected = DemonstrationVersion.objects.create(
        demonstration=demonstration,
        number=2,
        transcript=transcript,
        tools=first.tools,
        score=first.score,
        passed=True,
        strict=True,
        environment_revision=first.environment_revision,
        spec_hash=first.spec_hash,
    )
    demonstration.current_version = corrected
    demonstration.save(update_fields=["current_version"])
    return corrected


def _exported_weights(version, split="train"):
    """The weights of the assistant messages of each trl line, by position."""
    export = version.exports.get(format="trl", split=split)
    lines = export_absolute_path(export).read_text().splitlines()
    return [
        [m["weight"] for m in json.loads(line)["messages"] if m["role"] == "assistant"]
        for line in lines
    ]


def test_a_reviewed_copy_wins_over_its_untouched_twin(dataset, author, sample_environments):
    env = sample_environments[0]
    transcript, tools, _score = oracle_transcript(env, "book-q3-review")
    assistants = [i for i, m in enumerate(transcript) if m["role"] == "assistant"]
    untouched = make_demonstration(env, "book-q3-review", transcript=transcript, tools=tools)
    # the same run approved twice; the reviewer excluded the first assistant turn of the
    # later copy (a correction: its version 2)
    twin = make_demonstration(env, "book-q3-review", transcript=transcript, tools=tools)
    excluded = json.loads(json.dumps(transcript))
    excluded[assistants[0]]["weight"] = 0
    corrected = _correct(twin, excluded)
    # a third copy, untouched and younger: removed too
    younger = make_demonstration(env, "book-q3-review", transcript=transcript, tools=tools)
    version = build(dataset, author, validation_fraction=0)

    assert (version.train_rows, version.removed_duplicates) == (1, 2)
    row = DatasetRow.objects.get(version=version)
    assert (row.demonstration_id, row.demonstration_version_id) == (twin.pk, corrected.pk)
    reason = "the same messages (tool-call ids renumbered)"
    assert version.removals == [
        {
            "demonstration": untouched.pk,
            "kept": twin.pk,
            "kind": "exact",
            "reason": reason + "; the reviewed copy is kept, with its weights",
        },
        {"demonstration": younger.pk, "kept": twin.pk, "kind": "exact", "reason": reason},
    ]
    assert "1 reviewed copies kept over their unreviewed twins" in version.job.message
    expected = [1] * len(assistants)
    expected[0] = 0
    assert _exported_weights(version) == [expected]


def test_an_excluded_turn_wins_over_an_untouched_twin_and_two_reviews_keep_the_oldest(
    dataset, author, sample_environments
):
    env = sample_environments[0]
    transcript, tools, _score = oracle_transcript(env, "book-q3-review")
    assistants = [i for i, m in enumerate(transcript) if m["role"] == "assistant"]
    plain = make_demonstration(env, "book-q3-review", transcript=transcript, tools=tools)
    first_cut = json.loads(json.dumps(transcript))
    first_cut[assistants[0]]["weight"] = 0
    excluded = make_demonstration(env, "book-q3-review", transcript=first_cut, tools=tools)
    last_cut = json.loads(json.dumps(transcript))
    last_cut[assistants[-1]]["weight"] = 0
    later = make_demonstration(env, "book-q3-review", transcript=last_cut, tools=tools)
    version = build(dataset, author, validation_fraction=0)

    assert [r["demonstration"] for r in version.removals] == [plain.pk, later.pk]
    assert [r["kept"] for r in version.removals] == [excluded.pk, excluded.pk]
    assert list(
        DatasetRow.objects.filter(version=version).values_list("demonstration", flat=True)
    ) == [excluded.pk]


def test_only_approved_demonstrations_enter(dataset, author, sample_environments):
    env = sample_environments[2]
    approved = make_demonstration(env, "answer-refund-ticket")
    transcript, tools, _ = oracle_transcript(env, "answer-refund-ticket")
    for n, status in enumerate(
        [
            DemonstrationStatus.REJECTED,
            DemonstrationStatus.PENDING,
            DemonstrationStatus.NEEDS_CHANGES,
        ]
    ):
        variant = json.loads(json.dumps(transcript))
        variant[-1]["content"] += f" ({status} {n})"
        make_demonstration(
            env, "answer-refund-ticket", transcript=variant, tools=tools, status=status
        )
    version = build(dataset, author)
    assert version.demonstrations == 1
    assert list(
        DatasetRow.objects.filter(version=version).values_list("demonstration_id", flat=True)
    ) == [approved.pk]


def test_filters_apply(dataset, author, approved_demonstrations, sample_environments):
    support = sample_environments[2]
    version = build(
        dataset,
        author,
        filters=VersionFilter(environments=(support.pk,), capabilities=("follow-policy",)),
    )
    # escalate-platinum-outage (train, 3 takes) and close-and-handle-followup (eval, 1).
    assert (version.demonstrations, version.excluded_eval, version.rows_total) == (4, 1, 3)
    assert version.validation_rows == 0  # one environment: everything is train
    assert version.filters["environments"] == [support.pk]
    assert version.capability_mix["follow-policy"] == {"train": 3, "validation": 0}


def test_figures(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    stats = version.token_stats
    assert stats["all"]["rows"] == 18
    assert stats["train"]["rows"] == version.train_rows
    assert stats["all"]["p50"] <= stats["all"]["p95"] <= stats["all"]["max"]
    assert stats["all"]["total"] == sum(
        DatasetRow.objects.filter(version=version).values_list("tokens", flat=True)
    )
    assert version.models_used == [{"model": "oracle", "policy": "oracle", "rows": 18}]
    assert sum(env["rows"] for env in version.environments) == 18
    assert all(
        env["revisions"] == [1] and len(env["spec_hashes"]) == 1 for env in version.environments
    )


def test_exports_are_cached_linted_and_carded(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    exports = {(e.format, e.split): e for e in version.exports.all()}
    assert set(exports) == {
        (fmt, split)
        for fmt in ("openai", "trl", "sharegpt", "trl_parquet", "trl_turns", "sharegpt_turns")
        for split in ("train", "validation")
    } | {("card", "")}
    for (fmt, split), export in exports.items():
        assert export.status == ExportStatus.READY, (fmt, split, export.lint)
        path = export_absolute_path(export)
        data = path.read_bytes()
        assert len(data) == export.size
        import hashlib

        assert hashlib.sha256(data).hexdigest() == export.sha256
        if fmt not in ("card", "trl_parquet"):  # tests/datasets/test_trl_parquet.py
            assert data.decode().count("\n") == export.rows
            trajectories = version.train_rows if split == "train" else version.validation_rows
            if fmt.endswith("_turns"):  # one row per trained turn
                assert export.rows > trajectories
            else:
                assert export.rows == trajectories
    card = export_absolute_path(exports[("card", "")]).read_text()
    assert version.checksum in card
    assert "Coworker SFT — version 1" in card


def test_too_few_rows_for_openai_train_is_refused(dataset, author, sample_environments):
    env = sample_environments[0]
    make_demonstration(env, "book-q3-review")
    version = build(dataset, author, validation_fraction=0)
    openai_train = version.exports.get(format="openai", split="train")
    assert openai_train.status == ExportStatus.INVALID
    assert openai_train.path == "" and openai_train.sha256 == ""
    assert openai_train.lint["errors"] == [
        {"line": None, "message": "The training file has 1 examples; openai needs at least 10."}
    ]
    assert version.exports.get(format="trl", split="train").status == ExportStatus.READY
    assert version.exports.get(format="openai", split="validation").status == ExportStatus.EMPTY
    assert version.job.message.endswith(
        "; 5 of 12 exports offered; not offered: openai (The training file has 1 examples; "
        "openai needs at least 10.)."
    )


def test_verify(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    job = dataset_version_verify_start(version=version, user=author)
    dataset_version_verify_job(job.pk)
    version.refresh_from_db()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert version.verify_ok is True
    assert version.verify_message == (
        "Verified: 18 rows hash to the recorded checksum; 13 cached files match their sha256."
    )
    # Someone edits a stored transcript behind the app's back: verify notices.
    row = DatasetRow.objects.filter(version=version).order_by("split", "position").first()
    dv = row.demonstration_version
    dv.transcript[-1]["content"] = "tampered"
    dv.save(update_fields=["transcript"])
    export = version.exports.get(format="trl", split="train")
    export_absolute_path(export).write_text("altered\n")
    job = dataset_version_verify_start(version=version, user=author)
    dataset_version_verify_job(job.pk)
    version.refresh_from_db()
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert version.verify_ok is False
    assert (
        f"1 rows changed content (demonstrations {row.demonstration_id})" in version.verify_message
    )
    assert "the checksum is now" in version.verify_message
    assert "the cached trl train file was altered" in version.verify_message
    assert not export_absolute_path(export).exists()


def test_a_failed_build_leaves_nothing_behind(
    dataset, author, approved_demonstrations, monkeypatch
):
    def boom(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("apps.datasets.services.build.card_write", boom)
    version = build(dataset, author)
    assert version.status == VersionStatus.FAILED
    assert version.job.status == JobStatus.FAILED
    assert not DatasetRow.objects.filter(version=version).exists()
    assert not DatasetExport.objects.filter(version=version).exists()


def test_a_redelivered_build_does_nothing(dataset, author, approved_demonstrations):
    version = build(dataset, author)
    checksum = version.checksum
    dataset_version_build_job(version.job_id)  # the job is finished: not claimable
    version.refresh_from_db()
    assert (version.status, version.checksum) == (VersionStatus.READY, checksum)
    assert DatasetRow.objects.filter(version=version).count() == 18


def test_an_empty_selection_is_refused_before_a_version_exists(
    dataset, author, sample_environments
):
    with pytest.raises(ApplicationError) as refused:
        build(dataset, author)
    assert refused.value.message == (
        "Nothing to build yet: this project has no approved train-task demonstration. "
        "Approve some in the review queue first."
    )
    make_demonstration(sample_environments[0], "notice-moved-dentist")  # an eval task
    with pytest.raises(ApplicationError) as refused:
        build(dataset, author)
    assert refused.value.message == (
        "Nothing to build: the filter matches 1 approved demonstration, all of eval tasks, "
        "which never enter a dataset. Approve train-task demonstrations in the review queue, "
        "or widen the filter."
    )
    make_demonstration(sample_environments[0], "book-q3-review")
    with pytest.raises(ApplicationError) as refused:
        build(dataset, author, filters=VersionFilter(capabilities=("respect-confidentiality",)))
    assert refused.value.message == (
        "Nothing to build: no approved train-task demonstration matches this filter. "
        "Widen the filter, or approve more in the review queue."
    )
    assert not DatasetVersion.objects.exists()
    assert not Job.objects.exists()


def test_a_selection_emptied_after_the_check_fails_the_build_with_a_reason(
    dataset, author, sample_environments
):
    demonstration = make_demonstration(sample_environments[0], "book-q3-review")
    version = dataset_version_create(
        dataset=dataset, user=author, filters=VersionFilter(), enqueue=False
    )
    demonstration.status = DemonstrationStatus.REJECTED  # decided again before the build ran
    demonstration.save(update_fields=["status"])
    dataset_version_build_job(version.job_id)
    version.refresh_from_db()
    assert version.status == VersionStatus.FAILED
    assert version.job.status == JobStatus.FAILED
    assert version.job.message == (
        "Nothing to build: the filter matches 0 approved demonstrations. Approve train-task "
        "demonstrations in the review queue, or widen the filter."
    )
    assert not DatasetRow.objects.filter(version=version).exists()
