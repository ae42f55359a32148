"""Reading an SFT version's sources: the approved demonstrations its filter matches, oldest
first, in chunks; eval-task ones kept out and counted; exact, then near duplicates removed,
recording what was removed and why; each kept row hashed and counted, with its
environment's lineage.

Exact duplicates are compared without their weights, and of two copies the **reviewed**
one is kept (a correction by a reviewer: a demonstration version after the first, else a
copy with a turn excluded from training), the oldest when both or neither are: otherwise an
untouched twin would keep training the turn a reviewer excluded from the other copy."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace

from apps.core.services import JobContext
from apps.curation.selectors import demonstrations_for_dataset
from apps.datasets.formats import (
    canonical_json,
    normalize_messages,
    normalize_tools,
    transcript_sha256,
)
from apps.datasets.formats.similarity import (
    leak_keys,
    masked_signature,
    near_duplicate_reason,
    near_signature,
    retry_signature,
)
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.models import DatasetVersion
from apps.datasets.services.datasets import VersionFilter
from apps.datasets.services.exports import CHUNK_SIZE
from apps.datasets.splitting import row_group_key

MAX_REMOVALS_KEPT = 1000
COLUMNS = (
    "pk",
    "current_version_id",
    "current_version__number",
    "current_version__transcript",
    "current_version__tools",
    "current_version__environment_revision",
    "current_version__spec_hash",
    "split",
    "task__split",
    "environment_id",
    "environment_name",
    "capability_slugs",
    "model_name",
    "policy",
)


@dataclass(frozen=True)
class Source:
    """One matched demonstration as read (``COLUMNS``, in order)."""

    pk: int
    version_id: int
    version_number: int
    transcript: object
    tools: object
    revision: int | None
    spec_hash: str
    split: str
    task_split: str | None
    env_id: int | None
    env_name: str
    capabilities: list | None
    model_name: str
    policy: str

    @property
    def is_eval(self) -> bool:
        return self.split == "eval" or self.task_split == "eval"

    def light(self) -> Source:
        return replace(self, transcript=None, tools=None)

    @property
    def env_key(self) -> str:
        """Its environment in this database (lineage; the split only joins by it)."""
        return f"env:{self.env_id}" if self.env_id is not None else f"name:{self.env_name}"


def _reviewed(source: Source, messages: list) -> bool:
    """Whether a reviewer changed this copy: corrected, or with a turn excluded."""
    return source.version_number > 1 or any(m.get("weight") == 0 for m in messages)


def _weightless_sha256(messages: list) -> str:
    return transcript_sha256([{k: v for k, v in m.items() if k != "weight"} for m in messages])


@dataclass(frozen=True)
class Candidate:
    """A kept row before the split, with what its lineage needs."""

    pk: int
    version_id: int
    env_key: str
    tokens: int
    content: str
    capabilities: tuple[str, ...]
    source: Source  # its transcript and tools dropped (``Source.light``)
    base_group: str
    join_keys: tuple[str, ...]
    reviewed: bool


@dataclass
class Read:
    """What one pass over the matching demonstrations kept, and what it left out."""

    total: int
    candidates: list[Candidate] = field(default_factory=list)
    environments: dict[str, dict] = field(default_factory=dict)
    removals: list[dict] = field(default_factory=list)
    excluded_eval: int = 0
    removed_duplicates: int = 0
    removed_near: int = 0
    reviewed_kept: int = 0  # duplicates where a later, reviewed copy replaced the first

    @property
    def join_rows(self) -> list[tuple]:
        """``(demonstration, base group, join keys)`` of the kept rows (``group_rows``)."""
        return [(c.pk, c.base_group, c.join_keys) for c in self.candidates]

    def remove(self, pk: int, kept: int, kind: str, reason: str) -> None:
        if kind == "exact":
            self.removed_duplicates += 1
        else:
            self.removed_near += 1
        if len(self.removals) < MAX_REMOVALS_KEPT:
            self.removals.append(
                {"demonstration": pk, "kept": kept, "kind": kind, "reason": reason}
            )

    def environment(self, source: Source) -> dict:
        env = self.environments.setdefault(
            source.env_key,
            {
                "key": source.env_key,
                "id": source.env_id,
                "name": source.env_name,
                "rows": 0,
                "revisions": set(),
                "spec_hashes": set(),
                "models": Counter(),
            },
        )
        env["rows"] += 1
        if source.revision is not None:
            env["revisions"].add(source.revision)
        if source.spec_hash:
            env["spec_hashes"].add(source.spec_hash)
        env["models"][(source.model_name, source.policy)] += 1
        return env


def _matching(version: DatasetVersion):
    filters = VersionFilter.from_dict(version.filters)
    return demonstrations_for_dataset(
        project=version.dataset.project,
        capabilities=list(filters.capabilities) or None,
        environment_ids=list(filters.environments) or None,
        min_score=filters.min_score,
        splits=None,  # eval ones are read to be counted, then kept out
        min_agreement=filters.min_agreement,
    )


EXACT_REASON = "the same messages (tool-call ids renumbered)"
REVIEWED_REASON = "; the reviewed copy is kept, with its weights"


class _Duplicates:
    """Exact (weights aside) then near duplicates of the rows kept so far: each signature
    maps to the index of its kept candidate."""

    def __init__(self, read: Read) -> None:
        self.read = read
        self.exact: dict[bytes, int] = {}
        self.near: dict[bytes, tuple[int, tuple[str, str]]] = {}

    def keep(self, candidate: Candidate, messages: list) -> None:
        """Keep ``candidate`` unless it duplicates a kept row; a reviewed copy replaces an
        unreviewed one in place (its removal recorded instead)."""
        read = self.read
        exact = bytes.fromhex(_weightless_sha256(messages))
        near = bytes.fromhex(near_signature(messages))
        why = (retry_signature(messages), masked_signature(messages))
        if exact in self.exact:
            index, kind, reason = self.exact[exact], "exact", EXACT_REASON
        elif near in self.near:
            index, kept_why = self.near[near]
            kind, reason = "near", near_duplicate_reason(kept_why, why)
        else:
            read.candidates.append(candidate)
            index, kind = len(read.candidates) - 1, ""
        # a replacing copy answers to its own signatures too
        self.exact.setdefault(exact, index)
        self.near.setdefault(near, (index, why))
        if not kind:
            return
        kept = read.candidates[index]
        if candidate.reviewed and not kept.reviewed:
            read.candidates[index] = candidate
            read.reviewed_kept += 1
            read.remove(kept.pk, candidate.pk, kind, reason + REVIEWED_REASON)
        else:
            read.remove(candidate.pk, kept.pk, kind, reason)


def read_demonstrations(
    version: DatasetVersion, context: JobContext, counter: TokenCounter
) -> Read:
    """Read the matching demonstrations, keep eval-task ones out, drop exact and near
    duplicates (recording why), hash and count each kept row."""
    matching = _matching(version)
    total = matching.count()
    context.progress(0, max(total, 1), f"Reading {total} approved demonstrations…")
    read = Read(total=total)
    duplicates = _Duplicates(read)
    rows = matching.values_list(*COLUMNS).iterator(chunk_size=CHUNK_SIZE)
    for done, row in enumerate(rows, start=1):
        source = Source(*row)
        if done % CHUNK_SIZE == 0:
            context.progress(done, max(total, 1))
        if source.is_eval:
            read.excluded_eval += 1
            continue
        messages, tool_list = normalize_messages(source.transcript), normalize_tools(source.tools)
        text = canonical_json({"messages": messages, "tools": tool_list})
        content = hashlib.sha256(text.encode()).hexdigest()
        candidate = Candidate(
            pk=source.pk,
            version_id=source.version_id,
            env_key=source.env_key,
            tokens=counter.count(text),
            content=content,
            capabilities=tuple(sorted(set(source.capabilities or []))),
            source=source.light(),
            # named by content, so the split is the same in any database; joined with the
            # rest of its environment and with what would leak (not a template family's
            # every environment)
            base_group=row_group_key(source.spec_hash, content),
            join_keys=(source.env_key, *sorted(leak_keys(messages))),
            reviewed=_reviewed(source, messages),
        )
        duplicates.keep(candidate, messages)
    for candidate in read.candidates:
        read.environment(candidate.source)
    return read
