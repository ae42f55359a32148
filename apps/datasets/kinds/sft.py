"""SFT rows (``DatasetKind.SFT``): approved demonstrations (``sft_read.py`` reads them),
split by group, stratified by capability, stored as ``DatasetRow``s with their figures.

1. read, keep eval tasks out, remove duplicates (``sft_read.read_demonstrations``);
2. group the rows (environment revision, joined by environment and by shared masked
   prompts and replies; every key from content, not ids), split by group stratified by
   capability with the seed (``splitting.py``), order each split with the seed, store the
   rows;
3. figures: counts, token statistics, capability mix, groups, environment and model
   lineage, and the checksum over the rows;
4. exports: one pass per split writes every format (``services/exports.py``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from apps.core.exceptions import ApplicationError
from apps.core.services import JobContext
from apps.datasets.card import render_card
from apps.datasets.formats import fingerprint, normalize_messages, normalize_tools
from apps.datasets.formats.media import Media
from apps.datasets.formats.tokens import TokenCounter
from apps.datasets.kinds.base import Built, Recheck
from apps.datasets.kinds.sft_read import Candidate, Read, read_demonstrations
from apps.datasets.models import DatasetExport, DatasetKind, DatasetRow, DatasetVersion
from apps.datasets.services.exports import (
    CHUNK_SIZE,
    SFT_FORMATS,
    card_info,
    exports_write,
    fitted_rows,
    render_line,
    split_has_images,
)
from apps.datasets.splitting import (
    SPLIT_KEYS,
    SPLITS,
    Checksum,
    choose_validation,
    group_rows,
    row_order_key,
    token_stats,
)
from apps.environments.attachments import attachment_bytes

ROW_BATCH = 1000
FIELDS = (
    "split_keys",
    "demonstrations",
    "train_rows",
    "validation_rows",
    "excluded_eval",
    "removed_duplicates",
    "removed_near_duplicates",
    "removals",
    "groups",
    "tokenizer",
    "token_counting",
    "token_stats",
    "capability_mix",
    "environments",
    "models_used",
)


def _nothing_to_build(read: Read) -> ApplicationError:
    found = read.total
    return ApplicationError(
        f"Nothing to build: the filter matches {found} approved demonstration"
        f"{'' if found == 1 else 's'}"
        + (
            f", {read.excluded_eval} of eval tasks (always kept out)"
            f" and {read.removed_duplicates + read.removed_near} duplicates"
            if found
            else ""
        )
        + ". Approve train-task demonstrations in the review queue, or widen the filter."
    )


@dataclass
class _Split:
    """The rows of each split in order, each row's group, and what each group holds."""

    by_split: dict[str, list[Candidate]]
    group_of: dict[int, str]
    groups: dict[str, list]  # group -> [rows, capabilities Counter, environment keys]
    validation: set[str]

    def side(self, group: str) -> str:
        return "validation" if group in self.validation else "train"


def _split(version: DatasetVersion, read: Read) -> _Split:
    group_of = group_rows(read.join_rows)
    groups: dict[str, list] = {}
    for c in read.candidates:
        entry = groups.setdefault(group_of[c.pk], [0, Counter(), set()])
        entry[0] += 1
        entry[1].update(c.capabilities)
        entry[2].add(c.env_key)
    validation = choose_validation(
        {group: (size, caps) for group, (size, caps, _) in groups.items()},
        seed=version.seed,
        fraction=version.validation_fraction,
    )
    by_split: dict[str, list] = {split: [] for split in SPLITS}
    for c in read.candidates:
        by_split["validation" if group_of[c.pk] in validation else "train"].append(c)
    for split in SPLITS:
        by_split[split].sort(key=lambda c: row_order_key(version.seed, c.content))
    return _Split(by_split, group_of, groups, validation)


def _store(version: DatasetVersion, split: _Split) -> tuple[Checksum, dict, dict]:
    """Store the rows in order: the checksum, tokens per split and capability mix."""
    checksum = Checksum()
    tokens: dict[str, list[int]] = {name: [] for name in SPLITS}
    mix: dict[str, Counter] = defaultdict(Counter)
    batch: list[DatasetRow] = []
    for name in SPLITS:
        for position, c in enumerate(split.by_split[name]):
            checksum.add(
                split=name, demonstration=c.pk, version=c.version_id, content_sha256=c.content
            )
            tokens[name].append(c.tokens)
            for slug in c.capabilities or ("",):
                mix[slug][name] += 1
            batch.append(
                DatasetRow(
                    version=version,
                    split=name,
                    position=position,
                    demonstration_id=c.pk,
                    demonstration_version_id=c.version_id,
                    environment_key=c.env_key,
                    group_key=split.group_of[c.pk][:240],
                    tokens=c.tokens,
                    content_sha256=c.content,
                )
            )
            if len(batch) >= ROW_BATCH:
                DatasetRow.objects.bulk_create(batch)
                batch = []
    DatasetRow.objects.bulk_create(batch)
    return checksum, tokens, mix


def _groups(split: _Split, environments: dict) -> list[dict]:
    return sorted(
        (
            {
                "key": group,
                "split": split.side(group),
                "rows": size,
                "environments": sorted(environments[key]["name"] for key in keys),
                "joined_by_similarity": len(keys) > 1,
            }
            for group, (size, _caps, keys) in split.groups.items()
        ),
        key=lambda g: (g["split"] != "train", g["key"]),
    )


def _environments(split: _Split, read: Read) -> list[dict]:
    env_group = {c.env_key: split.group_of[c.pk] for c in read.candidates}
    return sorted(
        (
            {
                "key": env["key"],
                "id": env["id"],
                "name": env["name"],
                "group": env_group[key],
                "split": split.side(env_group[key]),
                "rows": env["rows"],
                "revisions": sorted(env["revisions"]),
                "spec_hashes": sorted(env["spec_hashes"]),
            }
            for key, env in read.environments.items()
        ),
        key=lambda env: (env["split"] != "train", env["name"], env["key"]),
    )


def _models(read: Read) -> list[dict]:
    models = Counter()
    for env in read.environments.values():
        models.update(env["models"])
    return [
        {"model": model, "policy": policy, "rows": count}
        for (model, policy), count in sorted(models.items(), key=lambda item: (-item[1], item[0]))
    ]


def _figures(version, read: Read, split: _Split, tokens: dict, mix: dict, counter) -> None:
    version.split_keys = SPLIT_KEYS
    version.demonstrations = read.total
    version.train_rows = len(split.by_split["train"])
    version.validation_rows = len(split.by_split["validation"])
    version.excluded_eval = read.excluded_eval
    version.removed_duplicates = read.removed_duplicates
    version.removed_near_duplicates = read.removed_near
    version.removals = read.removals
    version.tokenizer = counter.name if not counter.is_estimate else ""
    version.token_counting = counter.describe()
    version.token_stats = {
        "all": token_stats(tokens["train"] + tokens["validation"]),
        **{name: token_stats(tokens[name]) for name in SPLITS},
    }
    version.capability_mix = {
        slug: {name: counts.get(name, 0) for name in SPLITS} for slug, counts in sorted(mix.items())
    }
    version.groups = _groups(split, read.environments)
    version.environments = _environments(split, read)
    version.models_used = _models(read)


class SftKind:
    kind = DatasetKind.SFT
    formats = SFT_FORMATS

    def rows(self, version: DatasetVersion, context: JobContext, counter: TokenCounter) -> Built:
        read = read_demonstrations(version, context, counter)
        if not read.candidates:
            raise _nothing_to_build(read)
        split = _split(version, read)
        checksum, tokens, mix = _store(version, split)
        _figures(version, read, split, tokens, mix, counter)
        version.checksum = checksum.hexdigest()
        return Built(
            fields=FIELDS,
            summary=(
                f"v{version.number}: {version.train_rows} train and {version.validation_rows} "
                f"validation rows ({read.excluded_eval} eval-task kept out, "
                f"{read.removed_duplicates} duplicates and {read.removed_near} "
                "near-duplicates removed"
                + (
                    f"; {read.reviewed_kept} reviewed copies kept over their unreviewed twins"
                    if read.reviewed_kept
                    else ""
                )
                + ")"
            ),
        )

    def exports(self, version: DatasetVersion, context: JobContext) -> list[DatasetExport]:
        """One pass per split; progress continues over the rows of each split."""
        total, written, exports = version.rows_total, 0, []
        context.progress(0, total, "Writing and linting the exports…")
        for split in SPLITS:
            exports += exports_write(
                version=version,
                split=split,
                on_row=lambda n, base=written: context.progress(min(base + n, total)),
            )
            written += version.train_rows if split == "train" else version.validation_rows
        context.progress(total, total)
        return exports

    def card(self, version: DatasetVersion) -> str:
        return render_card(card_info(version))

    def recheck(self, version: DatasetVersion, context: JobContext) -> Recheck:
        """Every row's content hash and the checksum, from the stored demonstration
        versions."""
        checksum, recheck = Checksum(), Recheck(source="demonstrations")
        total = version.rows_total
        for split in SPLITS:
            rows = (
                DatasetRow.objects.filter(version=version, split=split)
                .order_by("position")
                .values_list(
                    "demonstration_id",
                    "demonstration_version_id",
                    "content_sha256",
                    "demonstration_version__transcript",
                    "demonstration_version__tools",
                )
                .iterator(chunk_size=CHUNK_SIZE)
            )
            for pk, version_id, recorded, transcript, tools in rows:
                content, _ = fingerprint(normalize_messages(transcript), normalize_tools(tools))
                if content != recorded:
                    recheck.changed.append(pk)
                checksum.add(
                    split=split, demonstration=pk, version=version_id, content_sha256=content
                )
                recheck.counts[split] += 1
                if recheck.rows % CHUNK_SIZE == 0:
                    context.progress(recheck.rows, max(total, recheck.rows))
        recheck.checksum = checksum.hexdigest()
        return recheck

    def lines(self, version: DatasetVersion, fmt: str, split: str):
        media = Media(attachment_bytes) if split_has_images(version, split) else None
        for demonstration_id, messages, tools in fitted_rows(version, split):
            yield render_line(fmt, messages, tools, media), demonstration_id
