"""The protocol every dataset kind implements, driven by ``services/build.py``.

A kind knows its rows (how they are read from their sources, stored and hashed into the
checksum), its exports, its card and how to recheck its stored rows. The build and verify
services do everything the kinds share: the clean slate, saving the figures, the card file,
the version's status, the job's message, the cached files' hashes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from apps.core.services import JobContext
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.models import DatasetExport, DatasetVersion


@dataclass
class Built:
    """What a kind's ``rows`` step stored: the version fields it set (saved by the build
    service with the checksum) and its part of the job's message."""

    fields: tuple[str, ...]
    summary: str


@dataclass
class Recheck:
    """The stored rows hashed again: rows per split, the sources whose content changed (by
    the reference ``source`` names), and the checksum they give now."""

    source: str
    checksum: str = ""
    counts: dict[str, int] = field(default_factory=lambda: {"train": 0, "validation": 0})
    changed: list = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def problems(self, version: DatasetVersion) -> list[str]:
        problems = []
        train, validation = self.counts["train"], self.counts["validation"]
        if (train, validation) != (version.train_rows, version.validation_rows):
            problems.append(
                f"row counts {train}/{validation} differ from the recorded "
                f"{version.train_rows}/{version.validation_rows}"
            )
        if self.changed:
            shown = ", ".join(str(ref) for ref in self.changed[:10])
            problems.append(f"{len(self.changed)} rows changed content ({self.source} {shown})")
        if self.checksum != version.checksum:
            problems.append(f"the checksum is now {self.checksum}, not {version.checksum}")
        return problems


class DatasetKindRows(Protocol):
    """One dataset kind (``DatasetKind``): SFT, RL prompts or scored rollouts."""

    kind: str
    formats: tuple[str, ...]

    def rows(self, version: DatasetVersion, context: JobContext, counter: TokenCounter) -> Built:
        """Read the sources, store the rows in order, set the figures and the checksum on
        ``version`` (unsaved); raise ``ApplicationError`` when nothing is left to build."""

    def exports(self, version: DatasetVersion, context: JobContext) -> list[DatasetExport]:
        """Write, lint and record every export file of the stored rows."""

    def card(self, version: DatasetVersion) -> str:
        """The Markdown card, from the version's figures and exports."""

    def recheck(self, version: DatasetVersion, context: JobContext) -> Recheck:
        """Hash the stored rows again from their sources."""

    def lines(self, version: DatasetVersion, fmt: str, split: str) -> Iterator[tuple[str, object]]:
        """Each line of a JSONL export and the source it came from, from the stored rows."""
