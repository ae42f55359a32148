"""The prompt TRL's tool loop builds for a row is the same whether the episode runs in process
(``engine.trl_env.environment_class``) or on an environment server
(``apps.training.grpo.remote_environment_class``): TRL appends what ``reset`` returns to the
row's last message, so a row that already holds the prompt (the ``grpo`` export, and the
rows the app's own GRPO job trains on) must get nothing from either class, and an empty row
the same text from both."""

import json

import pytest

from apps.datasets.formats.rl_prompts import grpo_row, prompt_entry
from coworkenv_engine.session import EpisodeSession
from coworkenv_engine.spec import load_spec
from coworkenv_engine.trl_env import environment_class
from tests.engine.helpers import SAMPLES, load_json

ACME = load_spec(load_json(SAMPLES[0]))
TASK = "notice-moved-dentist"


def _export_row() -> dict:
    """The app's ``grpo`` export row of TASK (system prompt and first user message)."""
    task = ACME.task(TASK)
    observation = EpisodeSession(ACME, TASK, 0, faults=False).start()
    entry = prompt_entry(
        observation, environment_id=1, revision=1, spec_hash="h", title=task.title,
        split=task.split, capabilities=[], turns=len(task.turns),
    )  # fmt: skip
    return grpo_row(entry, 0)


def _empty_row() -> dict:
    """A row of a user's own dataset that leaves the prompt to ``reset``."""
    return {"prompt": [{"role": "user", "content": ""}], "environment": ACME.name,
            "task_key": TASK, "seed": 0}  # fmt: skip


def _training_row() -> dict:
    """The row the app's own GRPO job trains on (``apps.training.grpo``)."""
    from apps.training.grpo import task_dataset_rows

    return next(r for r in task_dataset_rows({ACME.name: ACME}, "") if r["task_key"] == TASK)


def _prompts_through_trl(env_class, rows, tmp_path) -> list[str]:
    """TRL's real ``_generate_and_score_completions`` (reset, tool loop, grading) on ``rows``
    with ``env_class``; the scripted model calls the task's first tool and then replies. Returns
    the decoded prompt of each rollout."""
    import datasets
    import transformers
    import trl

    from apps.training.grpo import grpo_config, make_reward, tokenizer_rows
    from apps.training.hyperparameters import validate_grpo_hyperparameters
    from apps.training.presets import build_text_preset

    base = build_text_preset(tokenizer_rows({ACME.name: ACME}), tmp_path / "tiny", 0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, padding_side="left")
    call = ACME.task(TASK).reference_solution[0].calls[0]
    text = f"<tool_call>\n{json.dumps({'name': call.tool, 'arguments': call.arguments})}\n"
    script = [text + "</tool_call><|im_end|>", "Done.<|im_end|>"]
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in script]

    class Scripted(trl.GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            self._turn = getattr(self, "_turn", -1) + 1
            return [encoded[self._turn] for _ in prompt_ids], None

    hp = validate_grpo_hyperparameters(
        {"beta": 0.0, "max_completion_length": 4096, "max_tool_calls": 4,
         "advantage": "dr_grpo"},
        preset="tiny-cpu",
    )  # fmt: skip
    trainer = Scripted(
        model=transformers.AutoModelForCausalLM.from_pretrained(base),
        reward_funcs=[make_reward("score", 2)],
        args=grpo_config(hp, tmp_path / "out", use_cuda=False),
        train_dataset=datasets.Dataset.from_list([_export_row()] * 2),
        processing_class=tokenizer,
        environment_factory={ACME.name: env_class},
    )
    trainer.model.train()
    output = trainer._generate_and_score_completions([dict(r) for r in rows])
    assert [env.grading is not None for env in trainer.environments] == [True] * len(rows)
    for env in trainer.environments:
        getattr(env, "_close", lambda: None)()
    return [
        tokenizer.decode(ids[mask.bool()])
        for ids, mask in zip(output["prompt_ids"], output["prompt_mask"], strict=True)
    ]


@pytest.mark.parametrize(
    "row", [_export_row, _training_row, _empty_row], ids=["grpo-export", "job", "empty-prompt"]
)
def test_in_process_and_server_environments_give_trl_the_same_prompt(row, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("uvicorn")
    from apps.training.grpo import remote_environment_class
    from coworkenv_engine.server import create_app
    from tests.engine.serving import running

    rows = [row(), row()]
    local = _prompts_through_trl(environment_class(ACME, faults=False), rows, tmp_path / "l")
    with running(create_app([ACME], token="tok")) as base:
        remote_class = remote_environment_class(ACME, url=base, token="tok", faults=False)
        remote = _prompts_through_trl(remote_class, rows, tmp_path / "r")
    assert remote == local
    user_message = ACME.task(TASK).turns[0].message
    assert all(prompt.count(user_message) == 1 for prompt in local)


def test_reset_adds_nothing_to_a_row_that_holds_the_prompt():
    pytest.importorskip("uvicorn")
    from apps.training.grpo import remote_environment_class
    from coworkenv_engine.server import create_app
    from tests.engine.serving import running

    rows = _export_row(), _training_row(), _empty_row()
    local = environment_class(ACME, faults=False)()
    with running(create_app([ACME], token="tok")) as base:
        remote = remote_environment_class(ACME, url=base, token="tok", faults=False)()
        got = [env.reset(**row) for env in (local, remote) for row in rows]
        remote._close()
    task = ACME.task(TASK)
    text = f"{task.system_prompt()}\n\n{task.turns[0].message}"
    assert got == [None, None, text, None, None, text]


def test_the_jobs_rows_prompt_the_student_as_its_runs_and_sft_rows_do():
    """System prompt, then the first user message: what a student batch sends the model and
    what the SFT rows trained it on, never both folded into one user message."""
    training = _training_row()
    assert training["prompt"] == _export_row()["prompt"]
    assert [m["role"] for m in training["prompt"]] == ["system", "user"]
    assert training["prompt"][1]["content"] == ACME.task(TASK).turns[0].message
