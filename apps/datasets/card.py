"""The dataset card: a Markdown document rendered from plain data (no Django).

Every value that came from a person or a model (dataset name, description, environment and
model names, capability slugs) is escaped so it stays text in any Markdown renderer; the
page shows the card as escaped plain text as well.
"""

from __future__ import annotations

import json
import re
from typing import Any

from apps.datasets.formats import FORMATS

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+!|~])")


def md(value: Any) -> str:
    """Escape for a Markdown table cell or line: specials backslashed, newlines folded."""
    text = "" if value is None else str(value)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split())


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return lines


def _or_none(value: Any) -> str:
    return "none" if value is None else str(value)


def _fmt_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


SAMPLE_PREFERENCE = tuple(
    (fmt, split) for split in ("train", "validation") for fmt in ("openai", "trl", "sharegpt")
)


# Per dataset kind (``DatasetKind`` values): the formats a sample command prefers.
SAMPLE_PREFERENCES = {
    "sft": SAMPLE_PREFERENCE,
    "rl_prompts": tuple((fmt, "train") for fmt in ("grpo", "verl", "nemo_gym", "verifiers")),
    "rollouts": (("rollouts", "train"),),
}


def sample_export(exports: list[dict[str, Any]], kind: str = "sft") -> tuple[str, str] | None:
    """The ``(format, split)`` a sample download command should name: the first offered
    (``ready``) export in the order ``SAMPLE_PREFERENCES`` gives the dataset's ``kind``, or
    None when none is offered."""
    offered = {(e["format"], e["split"]) for e in exports if e.get("status") == "ready"}
    preference = SAMPLE_PREFERENCES.get(kind, SAMPLE_PREFERENCE)
    return next((pair for pair in preference if pair in offered), None)


ESTIMATE_NOTE = (
    "estimated: characters of the row's canonical JSON divided by 4, rounded up "
    "(no tokenizer configured)"
)

# Who honours the per-turn weights (a reviewer's "exclude this turn from training").
WEIGHTS_NOTE = [
    "### Per-turn weights: which trainers honour them",
    "",
    "A reviewer can exclude an assistant turn from training (weight 0). Whether the "
    "exclusion takes effect depends on the consumer:",
    "",
    "- **OpenAI fine-tuning** (`openai`): honoured. It reads `weight` on assistant messages "
    "and trains only the weight-1 turns.",
    "- **TRL `SFTTrainer`** (`trl`): **not honoured**. With `assistant_only_loss` it trains "
    "every assistant turn; `weight` stays on the messages (chat templates ignore it) for a "
    "weight-aware collator to mask the excluded turns. Without one, excluded turns are "
    "trained on.",
    "- **LLaMA-Factory** (`sharegpt`): **not honoured**: its stock ShareGPT loader ignores "
    '`"loss": false` (an AgentGym convention); it takes a weight-aware collator to leave '
    "excluded turns out.",
    "- **Any trainer, unchanged**: the `trl_turns` (TRL's prompt-completion) and "
    "`sharegpt_turns` (LLaMA-Factory with `mask_history: true`) layouts make each trained "
    "turn a completion of its own, so an excluded turn is only ever prompt, never a label.",
]

MAX_REMOVALS_SHOWN = 50


def _removals_section(removals: list[dict[str, Any]], counts: dict[str, Any]) -> list[str]:
    removed = counts.get("removed_duplicates", 0) + counts.get("removed_near_duplicates", 0)
    lines = ["", "## Duplicates removed", ""]
    if not removed:
        return [*lines, "None: every matched train-task demonstration is a distinct example."]
    lines += [
        "Exact duplicates have the same messages once tool-call ids are renumbered "
        "(weights aside); near-duplicates are the same once tool calls an injected fault "
        "answered (and their retries' shifted ids and timestamps) are collapsed and record "
        "ids and dates masked. The copy a reviewer corrected (or excluded a turn of) is "
        "kept, with its weights; else the oldest.",
        "",
        *_table(
            ["removed demonstration", "kept demonstration", "kind", "why"],
            [
                [r["demonstration"], r["kept"], r["kind"], md(r["reason"])]
                for r in removals[:MAX_REMOVALS_SHOWN]
            ],
        ),
    ]
    if removed > MAX_REMOVALS_SHOWN:
        lines += ["", f"… {removed - MAX_REMOVALS_SHOWN} more (the API lists up to 1000)."]
    return lines


def _long_section(version: dict[str, Any], counts: dict[str, Any]) -> list[str]:
    """The maximum length, what happens to longer trajectories and what it did per split."""
    limit = version.get("max_tokens")
    lines = ["", "## Long trajectories", ""]
    if not limit:
        return [*lines, "No maximum length: every trajectory is one row, whatever its length."]
    if version.get("long_trajectories") == "split":
        lines.append(
            f"Maximum length {limit:,} tokens per row. Longer trajectories are **split by "
            "turn**: each row holds the history before one turn (its assistant steps have "
            "weight 0: context, not targets) and that turn's assistant steps as targets; a "
            "row still over the limit is dropped. Every format gets the same rows."
        )
    else:
        lines.append(
            f"Maximum length {limit:,} tokens per row. Longer trajectories are **dropped**."
        )
    if counts:
        lines += [
            "",
            *_table(
                [
                    "split",
                    "trajectories",
                    "over the limit",
                    "rows from splitting",
                    "split rows dropped",
                    "trajectories dropped",
                    "rows exported",
                ],
                [
                    [
                        split,
                        c.get("trajectories", 0),
                        c.get("over_limit", 0),
                        c.get("split_rows", 0),
                        c.get("dropped_rows", 0),
                        c.get("dropped_trajectories", 0),
                        c.get("rows", 0),
                    ]
                    for split, c in counts.items()
                ],
            ),
        ]
    return lines


def _contents(info: dict[str, Any]) -> list[str]:
    dataset, version, counts = info["dataset"], info["version"], info["counts"]
    lines = [f"# {md(dataset['name'])} — version {version['number']}", ""]
    if dataset.get("description"):
        lines += [md(dataset["description"]), ""]
    return [
        *lines,
        f"Built by CoworkEnv from approved demonstrations on {md(version['created_at'])}"
        + (f" by {md(version['created_by'])}" if version.get("created_by") else "")
        + ".",
        "",
        "## Contents",
        "",
        *_table(
            ["", "rows"],
            [
                ["approved demonstrations matched by the filter", counts["demonstrations"]],
                ["eval-task demonstrations kept out (never exported)", counts["excluded_eval"]],
                ["exact duplicates removed", counts["removed_duplicates"]],
                [
                    "near-duplicates removed (retries collapsed, ids and dates masked)",
                    counts.get("removed_near_duplicates", 0),
                ],
                ["**train**", counts["train_rows"]],
                ["**validation**", counts["validation_rows"]],
            ],
        ),
        "",
        f"Tokens per row: {version.get('token_counting') or ESTIMATE_NOTE}.",
        "",
        *_table(
            ["split", "rows", "mean", "p50", "p95", "max", "total"],
            [
                [split, s["rows"], s["mean"], s["p50"], s["p95"], s["max"], s["total"]]
                for split, s in info["token_stats"].items()
            ],
        ),
    ]


def _mix_section(mix: dict[str, Any]) -> list[str]:
    lines = ["", "## Capability mix", ""]
    if not mix:
        return [*lines, "No capability tags on these demonstrations."]
    lines += _table(
        ["capability", "train", "validation"],
        [
            [f"`{md(slug)}`" if slug else "(none)", c.get("train", 0), c.get("validation", 0)]
            for slug, c in mix.items()
        ],
    )
    validation_only = [
        slug for slug, c in mix.items() if c.get("validation", 0) and not c.get("train", 0)
    ]
    if validation_only:
        lines += [
            "",
            "Only in validation (no train rows): "
            + ", ".join(f"`{md(slug)}`" for slug in validation_only)
            + ".",
        ]
    has_validation = any(c.get("validation", 0) for c in mix.values())
    missing = [
        slug
        for slug, c in mix.items()
        if slug and has_validation and c.get("train", 0) and not c.get("validation", 0)
    ]
    if missing:
        lines += [
            "",
            "No validation rows (their rows share groups that went to train; validation "
            "metrics say nothing about them): "
            + ", ".join(f"`{md(slug)}`" for slug in missing)
            + ".",
        ]
    return lines


SPLIT_NOTE = (
    "- The split is by group, stratified by capability: each environment is a group, and "
    "groups whose rows share a prompt or a reply once names and numbers are masked are "
    "joined, so no group (and no environment) has rows on both sides; every capability "
    "found in two or more groups gets validation rows where that leaves every capability "
    "some train rows, and no capability is only in validation unless its rows all share "
    "one group."
)
SPLIT_KEYS_NOTE = {
    "content": "- Split keys: content. A group is named by an environment revision's spec "
    "hash (`spec:…`, or a transcript's content hash, `transcript:…`, where none was "
    "recorded) and rows are ordered by their content hashes, so the same demonstrations "
    "with the same seed split and order the same in any database.",
    "": "- Split keys: database ids (groups `env:<id>`, rows ordered by demonstration id), "
    "as versions were built before content keys: the same demonstrations in another "
    "database split differently, and a rebuild today is keyed by content.",
}


def _lineage_section(info: dict[str, Any]) -> list[str]:
    dataset, version = info["dataset"], info["version"]
    filters = version["filters"]
    return [
        "",
        "## Lineage",
        "",
        f"- Dataset: {md(dataset['name'])} (id {dataset['id']}), version {version['number']}"
        + (
            f", rebuilt from version {version['rebuilt_from']}"
            if version.get("rebuilt_from")
            else ""
        ),
        f"- Checksum (sha256 over the rows): `{version['checksum']}`",
        f"- Seed: {version['seed']}; validation fraction: {version['validation_fraction']}",
        "- Filter: approved demonstrations only; task split train only"
        + f"; capabilities: {', '.join(md(c) for c in filters.get('capabilities') or []) or 'any'}"
        + f"; environments: {', '.join(str(e) for e in filters.get('environments') or []) or 'any'}"
        + f"; min score: {_or_none(filters.get('min_score'))}"
        + f"; min reviewer agreement: {_or_none(filters.get('min_agreement'))}",
        SPLIT_NOTE,
        SPLIT_KEYS_NOTE[version.get("split_keys") or ""],
        "",
        *_table(
            ["group", "split", "rows", "environments", "joined by similarity"],
            [
                [
                    f"`{md(g['key'])}`",
                    g["split"],
                    g["rows"],
                    ", ".join(md(name) for name in g.get("environments") or []),
                    "yes" if g.get("joined_by_similarity") else "no",
                ]
                for g in info.get("groups") or []
            ],
        ),
        "",
        *_table(
            ["environment", "id", "split", "rows", "revisions", "spec hashes"],
            [
                [
                    md(env["name"]),
                    env.get("id") if env.get("id") is not None else "(deleted)",
                    env["split"],
                    env["rows"],
                    ", ".join(str(r) for r in env.get("revisions") or []) or "—",
                    ", ".join(f"`{h[:12]}`" for h in env.get("spec_hashes") or []) or "—",
                ]
                for env in info["environments"]
            ],
        ),
        "",
        *_table(
            ["model", "policy", "rows"],
            [[md(m["model"]) or "—", md(m["policy"]) or "—", m["rows"]] for m in info["models"]],
        ),
    ]


def _format_notes(exports: list[dict[str, Any]]) -> list[str]:
    """What a row of each exported format holds and how its trainer treats the weights
    (each format's ``layout``)."""
    shown = {e["format"] for e in exports}
    notes = [
        f"- `{fmt}`: {entry['layout']}."
        for fmt, entry in FORMATS.items()
        if fmt in shown and entry.get("layout")
    ]
    return [*notes, "", *WEIGHTS_NOTE, ""] if notes else [*WEIGHTS_NOTE, ""]


def _files_section(info: dict[str, Any]) -> list[str]:
    lines = ["", "## Files and formats", ""]
    exports = info.get("exports") or []
    if exports:
        lines += _table(
            ["format", "split", "rows", "size", "sha256", "linter"],
            [
                [
                    e["format"],
                    e["split"],
                    e["rows"],
                    _fmt_size(e["size"]),
                    f"`{e['sha256'][:16]}…`" if e.get("sha256") else "—",
                    e["status"],
                ]
                for e in exports
            ],
        )
        lines.append("")
    lines += _format_notes(exports)
    if info.get("dataset_info"):
        lines += [
            "LLaMA-Factory `dataset_info.json` entries (the download keeps these names):",
            "",
            "```json",
            json.dumps(info["dataset_info"], indent=2, ensure_ascii=False),
            "```",
            "",
        ]
    sample = sample_export(exports)
    if info.get("api") and sample:
        fmt, split = sample
        lines += [
            "Download over the REST API (a token from Account → API tokens):",
            "",
            "```sh",
            'curl -H "Authorization: Bearer $COWORKENV_TOKEN" \\',
            f'  "$COWORKENV_URL{info["api"]}?format={fmt}&split={split}" -OJ',
            "```",
            "",
        ]
    return lines


def render_card(info: dict[str, Any]) -> str:
    """``info`` keys: dataset (name, id, description), version (number, created_at,
    created_by, seed, validation_fraction, split_keys, filters, checksum, rebuilt_from),
    counts, token_stats, capability_mix, environments, models, exports, dataset_info, api."""
    return "\n".join(
        [
            *_contents(info),
            *_long_section(info["version"], info.get("long_counts") or {}),
            *_mix_section(info["capability_mix"]),
            *_removals_section(info.get("removals") or [], info["counts"]),
            *_lineage_section(info),
            *_files_section(info),
        ]
    )
