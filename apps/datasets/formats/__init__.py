"""Training-data formats: pure functions from a transcript to an export row, and linters.

Nothing here imports Django. A transcript is a list of OpenAI chat messages (system, user,
assistant with ``tool_calls`` and/or ``content`` and an optional ``"weight": 0|1``, tool
messages with ``tool_call_id``); tools are OpenAI function tools. ``normalize_messages``
turns whatever a demonstration stored into that shape once; each format's ``*_row``
function renders one export line from the normalized messages, and its linter checks
every line it is given (streaming: it keeps counts, not rows).

Formats (see ``FORMATS``):

- ``openai``: OpenAI chat fine-tuning JSONL (``messages``, ``tools``, ``parallel_tool_calls``,
  per-assistant ``weight``);
- ``trl``: TRL SFTTrainer rows (``messages`` with ``arguments`` as objects, tool messages
  with ``name``; ``tools`` as a JSON string);
- ``sharegpt``: LLaMA-Factory ShareGPT rows (``conversations`` that alternate,
  ``system``, ``tools`` as a JSON string; ``"loss": false`` on excluded turns);
- ``trl_parquet``: the ``trl`` rows as Parquet with an ``Image`` feature (written by
  ``services/bundles.py`` with ``datasets``);
- ``trl_turns`` / ``sharegpt_turns`` (``turns.py``): one row per trained assistant turn,
  TRL prompt-completion rows and ShareGPT rows that end with the turn, so an excluded turn
  is only ever context, whatever the trainer (``"rows"``: a transcript gives several);
- ``rollouts``: scored rollouts of student rollout groups for offline RL (TRL messages,
  rewards, per-turn rewards and advantages under one variant); written by the versions of
  datasets of kind ``rollouts`` only (``"kind": "rollouts"``; the others are ``sft``'s).

Each format's ``layout`` (its module's ``LAYOUT``) says in a line what a row holds and
whether excluded turns stay out of the labels; the dataset card repeats it.
"""

from apps.datasets.formats import openai, rollouts, sharegpt, trl, turns
from apps.datasets.formats.lint import Linter, LintReport
from apps.datasets.formats.openai import OpenAILinter, openai_row
from apps.datasets.formats.rollouts import RolloutLinter, rollout_row
from apps.datasets.formats.sharegpt import ShareGptLinter, dataset_info_entry, sharegpt_row
from apps.datasets.formats.transcript import (
    approx_tokens,
    canonical_json,
    content_sha256,
    fingerprint,
    normalize_messages,
    normalize_tools,
    transcript_sha256,
)
from apps.datasets.formats.trl import TrlLinter, TrlParquetLinter, trl_row
from apps.datasets.formats.turns import (
    ShareGptTurnsLinter,
    TrlTurnsLinter,
    sharegpt_turn_rows,
    trl_turn_rows,
)

FORMATS = {
    "openai": {
        "row": openai_row,
        "linter": OpenAILinter,
        "label": "OpenAI chat fine-tuning",
        "layout": openai.LAYOUT,
    },
    "trl": {
        "row": trl_row,
        "linter": TrlLinter,
        "label": "TRL SFTTrainer (messages + tools)",
        "layout": trl.LAYOUT,
    },
    "sharegpt": {
        "row": sharegpt_row,
        "linter": ShareGptLinter,
        "label": "LLaMA-Factory ShareGPT",
        "layout": sharegpt.LAYOUT,
    },
    "trl_parquet": {
        "row": trl_row,
        "linter": TrlParquetLinter,
        "label": "TRL SFTTrainer Parquet (images as an Image feature)",
        "layout": trl.PARQUET_LAYOUT,
    },
    "trl_turns": {
        "rows": trl_turn_rows,
        "linter": TrlTurnsLinter,
        "label": "TRL SFTTrainer (prompt-completion, one row per trained turn)",
        "layout": turns.TRL_LAYOUT,
    },
    "sharegpt_turns": {
        "rows": sharegpt_turn_rows,
        "linter": ShareGptTurnsLinter,
        "label": "LLaMA-Factory ShareGPT (one row per trained turn, mask_history)",
        "layout": turns.SHAREGPT_LAYOUT,
    },
    # A rollouts dataset's one format (``kind``: the dataset kind that writes it); its row
    # takes the rollout's scores too, see formats/rollouts.py and services/rollouts.py.
    "rollouts": {
        "row": rollout_row,
        "linter": RolloutLinter,
        "label": "Scored rollouts (offline RL: rewards and advantages)",
        "kind": "rollouts",
        "layout": rollouts.LAYOUT,
    },
}


def format_rows(fmt: str, messages: list, tools: list, media=None) -> list[dict]:
    """The rows one transcript gives in ``fmt``: one, or (a ``"rows"`` format) one per
    trained turn, possibly none."""
    spec = FORMATS[fmt]
    if "rows" in spec:
        return spec["rows"](messages, tools, media)
    return [spec["row"](messages, tools, media)]


__all__ = [
    "FORMATS",
    "LintReport",
    "Linter",
    "OpenAILinter",
    "RolloutLinter",
    "ShareGptLinter",
    "TrlLinter",
    "approx_tokens",
    "canonical_json",
    "content_sha256",
    "dataset_info_entry",
    "fingerprint",
    "format_rows",
    "normalize_messages",
    "normalize_tools",
    "openai_row",
    "rollout_row",
    "sharegpt_row",
    "transcript_sha256",
    "trl_row",
]
