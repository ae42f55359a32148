"""The dataset-kind protocol: every kind is registered, and a recheck names what changed."""

from types import SimpleNamespace

from apps.datasets.kinds import KINDS, Recheck
from apps.datasets.models import DatasetKind


def test_every_kind_implements_the_protocol():
    assert set(KINDS) == set(DatasetKind.values)
    for name, kind in KINDS.items():
        assert kind.kind == name and kind.formats
        for step in ("rows", "exports", "card", "recheck", "lines"):
            assert callable(getattr(kind, step))


def test_a_recheck_reports_counts_changed_rows_and_checksum():
    version = SimpleNamespace(train_rows=2, validation_rows=1, checksum="abc")
    same = Recheck(source="runs", checksum="abc", counts={"train": 2, "validation": 1})
    assert same.rows == 3 and same.problems(version) == []
    changed = Recheck(
        source="tasks", checksum="def", counts={"train": 2, "validation": 0}, changed=["t1"]
    )
    assert changed.problems(version) == [
        "row counts 2/0 differ from the recorded 2/1",
        "1 rows changed content (tasks t1)",
        "the checksum is now def, not abc",
    ]
