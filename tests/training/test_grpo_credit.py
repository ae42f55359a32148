"""Per-turn and per-call credit in the ``grpo`` method (``apps.training.credit``): the
per-token advantages TRL's loss gets, against hand-computed values and against the engine's
own group table; the environment's record of which turn and call each tool method was; and
trajectory credit left exactly to TRL."""

import pytest

from apps.training.credit import (
    call_spans,
    group_values,
    model_segments,
    plan_segments,
    recording_class,
    rollout_credit,
    rollout_token_advantages,
    tool_names,
)
from apps.training.hyperparameters import HyperparameterError, validate_grpo_hyperparameters
from coworkenv_engine.rewards import GRPO_EPS, group_advantages, group_table
from coworkenv_engine.spec import load_spec
from coworkenv_engine.trl_env import coworkenv_reward, environment_class
from tests.engine.helpers import SAMPLES, load_json
from tests.training.conftest import execute_and_succeed

ACME = load_spec(load_json(SAMPLES[0]))
GAMMA = "\N{GREEK SMALL LETTER GAMMA}"
TASK = "notice-moved-dentist"  # two turns: create_event | list_events, update_event, send_email


def _call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# Rollout "a" as TRL 1.16 leaves it: assistant messages (model tokens) and tool results
# (masked), concatenated into one completion, then right padding.
A_MESSAGES = [
    {"role": "assistant", "content": "", "tool_calls": [_call("lookup", q="x")]},  # 3 tokens
    {"role": "tool", "name": "lookup", "content": "found"},  # 2
    {"role": "assistant", "content": "", "tool_calls": [_call("reply_to_user", message="ok")]},
    {"role": "tool", "name": "reply_to_user", "content": "next request"},  # 1
    {"role": "assistant", "content": "", "tool_calls": [_call("send", to="b")]},  # 2
    {"role": "tool", "name": "send", "content": "sent"},  # 1
    {"role": "assistant", "content": "Done."},  # 3
]
A_MASK = [1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 0]
A_ACTIONS = [  # what recording_class writes while TRL runs the tools
    {"tool": "lookup", "turn": 0, "turn_after": 0, "call": 0},
    {"tool": "reply_to_user", "turn": 0, "turn_after": 1, "call": None},
    {"tool": "send", "turn": 1, "turn_after": 1, "call": 1},
]
TOOLS = {"lookup", "send", "reply_to_user"}


def _engine_table(*envs) -> dict:
    """The engine's own advantages (``group_table``, gamma 0.5) for a group of finished
    two-turn episodes, from their gradings and audit logs."""
    return group_table(
        [
            {"grading": env.grading, "n_turns": 2,
             "audit_log": [e.to_dict() for e in env._session.episode.audit_log]}
            for env in envs
        ],
        gamma=0.5,
    )  # fmt: skip


def test_segments_and_plan_follow_the_tool_mask_and_the_record():
    assert model_segments(A_MASK) == [(0, 3), (5, 7), (8, 10), (11, 14)]
    assert model_segments([1, 1]) == [(0, 2)] and model_segments([0, 0]) == []
    plan = plan_segments(A_MESSAGES, A_ACTIONS, TOOLS)
    assert plan == [
        {"turn": 0, "calls": [{"tool": "lookup", "call": 0}]},
        {"turn": 0, "calls": [{"tool": "reply_to_user", "call": None}]},
        {"turn": 1, "calls": [{"tool": "send", "call": 1}]},
        {"turn": 1, "calls": []},
    ]
    # A call TRL could not run (unknown tool) has no record: skipped, the rest stay aligned.
    messages = [{**A_MESSAGES[0], "tool_calls": [_call("nope"), _call("lookup", q="x")]}]
    assert plan_segments(messages, A_ACTIONS[:1], TOOLS)[0]["calls"] == [
        {"tool": "nope", "call": None},
        {"tool": "lookup", "call": 0},
    ]


def test_per_turn_token_advantages_by_hand():
    """G = 2, two turns, gamma = 0.5. Turn rewards a = [0.2, 0.6], b = [0.4, 0.0].
    Reward-to-go: a = [0.2 + 0.5·0.6, 0.6] = [0.5, 0.6]; b = [0.4 + 0.5·0, 0] = [0.4, 0.0].
    Per turn index across the group, Dr. GRPO (no std): turn 0 mean 0.45 -> a +0.05, b -0.05;
    turn 1 mean 0.3 -> a +0.3, b -0.3. GRPO divides by the group's std (n - 1) + 1e-4:
    turn 0 std = √(2·0.05²) = 0.0707…, turn 1 std = √(2·0.3²) = 0.4243…"""
    rollouts = [
        {"grading": {}, "turn_rewards": [0.2, 0.6], "engine_calls": 2},
        {"grading": {}, "turn_rewards": [0.4, 0.0], "engine_calls": 0},
    ]
    values = group_values(rollouts, credit="turn", group_size=2, gamma=0.5, scale=False)
    assert values == [pytest.approx([0.05, 0.3]), pytest.approx([-0.05, -0.3])]
    scaled = group_values(rollouts, credit="turn", group_size=2, gamma=0.5, scale=True)
    s0, s1 = (2 * 0.05**2) ** 0.5, (2 * 0.3**2) ** 0.5
    assert scaled[0] == pytest.approx([0.05 / (s0 + GRPO_EPS), 0.3 / (s1 + GRPO_EPS)])
    assert scaled[1] == pytest.approx([-0.05 / (s0 + GRPO_EPS), -0.3 / (s1 + GRPO_EPS)])

    plan = plan_segments(A_MESSAGES, A_ACTIONS, TOOLS)
    tokens = rollout_token_advantages(credit="turn", mask=A_MASK, plan=plan, values=values[0])
    t0, t1 = 0.05, 0.3
    assert tokens == pytest.approx(
        [t0, t0, t0, 0, 0, t0, t0, 0, t1, t1, 0, t1, t1, t1, 0, 0]  # tool tokens, padding: 0
    )
    # Rollout b replied once with no tool call and the model stopped: one segment, turn 0.
    b_plan = plan_segments([{"role": "assistant", "content": "hi"}], [], TOOLS)
    b = rollout_token_advantages(credit="turn", mask=[1, 1, 0], plan=b_plan, values=values[1])
    assert b == pytest.approx([-0.05, -0.05, 0.0])
    # Ungraded rollouts take no part and get 0 everywhere.
    assert group_values([rollouts[0], None], credit="turn", group_size=2, gamma=0.5,
                        scale=False) == [[0.0, 0.0], []]  # fmt: skip
    assert rollout_token_advantages(credit="turn", mask=A_MASK, plan=plan, values=[]) == [0] * 16


def test_per_call_token_spans_by_hand():
    """Call advantages [0.7, -0.2] (calls 0 and 1 of the episode). A message calling two tools
    splits where the second call's name starts; replies and the final message get 0."""
    pieces = ['<tool_call>{"name": ', '"lookup"', ', "arguments": {}}</tool_call>',
              '<tool_call>{"name": ', '"send"', "}</tool_call>"]  # fmt: skip
    assert call_spans(pieces, ["lookup", "send"]) == [(0, 4), (4, 6)]
    assert call_spans(pieces, ["lookup", "missing"]) is None
    assert call_spans(["x"], []) == []

    messages = [
        {"role": "assistant", "content": "", "tool_calls": [_call("lookup"), _call("send")]},
        {"role": "tool", "name": "lookup", "content": "r"},
        {"role": "tool", "name": "send", "content": "r"},
        {"role": "assistant", "content": "", "tool_calls": [_call("reply_to_user", message="m")]},
        {"role": "tool", "name": "reply_to_user", "content": "The conversation is over."},
        {"role": "assistant", "content": "Done."},
    ]
    actions = [
        {"tool": "lookup", "turn": 0, "turn_after": 0, "call": 0},
        {"tool": "send", "turn": 0, "turn_after": 0, "call": 1},
        {"tool": "reply_to_user", "turn": 0, "turn_after": 1, "call": None},
    ]
    mask = [1] * 6 + [0, 0] + [1, 1] + [0] + [1, 1] + [0]
    decoded = [*pieces, "<tool_call>", "reply_to_user", "?", "Done", ".", "<pad>"]
    plan = plan_segments(messages, actions, TOOLS)
    tokens = rollout_token_advantages(
        credit="call", mask=mask, plan=plan, values=[0.7, -0.2],
        pieces=lambda start, end: decoded[start:end],
    )  # fmt: skip
    assert tokens == pytest.approx([0.7] * 4 + [-0.2] * 2 + [0, 0] + [0, 0] + [0] + [0, 0] + [0])
    # Names not in the text: the message's tokens take the mean of its calls' advantages.
    blind = rollout_token_advantages(
        credit="call", mask=mask, plan=plan, values=[0.7, -0.2],
        pieces=lambda start, end: ["?"] * (end - start),
    )  # fmt: skip
    assert blind[:6] == pytest.approx([0.25] * 6) and blind[6:] == [0.0] * 8


def _drive(env, solution: bool):
    """TRL's calls on a recording environment: the oracle's tool calls and replies (as the
    message list TRL keeps), or one idle reply; returns the completion's messages."""
    task = ACME.task(TASK)
    messages, final = [], "Done."
    if solution:
        for i, step in enumerate(task.reference_solution):
            for call in step.calls:
                result = getattr(env, call.tool)(**call.arguments)
                messages.append(
                    {"role": "assistant", "tool_calls": [_call(call.tool, **call.arguments)]}
                )
                messages.append({"role": "tool", "name": call.tool, "content": result})
            if i < len(task.turns) - 1:
                reply = env.reply_to_user(step.reply or "Done.")
                messages.append(
                    {"role": "assistant", "tool_calls": [_call("reply_to_user", message="ok")]}
                )
                messages.append({"role": "tool", "name": "reply_to_user", "content": reply})
            else:
                final = step.reply or final
    messages.append({"role": "assistant", "content": final})
    coworkenv_reward([messages], [env])  # the reward function ends and grades the episode
    return messages


def test_recorded_episodes_give_the_engines_turn_and_call_advantages():
    """The oracle and an idle rollout of a two-turn task through ``recording_class``: the
    record says which turn and engine call each tool method was, the group values are the
    engine's ``group_table`` numbers, and every model token of a turn takes its turn's."""
    cls = recording_class(environment_class(ACME, faults=False))
    assert cls.__name__ == environment_class(ACME).__name__
    good, idle = cls(), cls()
    for env in (good, idle):
        env.reset(task_key=TASK, seed=0)
    good_messages, idle_messages = _drive(good, True), _drive(idle, False)
    assert [(a["tool"], a["turn"], a["call"]) for a in good.actions] == [
        ("create_event", 0, 0), ("reply_to_user", 0, None),
        ("list_events", 1, 1), ("update_event", 1, 2), ("send_email", 1, 3),
    ]  # fmt: skip
    assert good.engine_calls == len(good._session.episode.audit_log) == 4
    assert idle.actions == [] and idle.engine_calls == 0
    assert good.grading["score"] == 1.0 and idle.grading["score"] == pytest.approx(0.2)
    assert "reply_to_user" in tool_names(good) and "reset" not in tool_names(good)

    rollouts = [rollout_credit(good), rollout_credit(idle)]
    table = _engine_table(good, idle)
    for credit, key in (("turn", "turn_advantages"), ("call", "call_advantages")):
        for method in ("grpo", "dr_grpo"):
            values = group_values(
                rollouts, credit=credit, group_size=2, gamma=0.5, scale=method == "grpo"
            )
            assert values == table[key][method]

    # One token per model message, one per tool result: turn 0 is the first two messages.
    values = group_values(rollouts, credit="turn", group_size=2, gamma=0.5, scale=False)
    mask = [1 if m["role"] == "assistant" else 0 for m in good_messages]
    plan = plan_segments(good_messages, good.actions, tool_names(good))
    tokens = rollout_token_advantages(credit="turn", mask=mask, plan=plan, values=values[0])
    t0, t1 = values[0]
    assert tokens == pytest.approx([t0, 0, t0, 0, t1, 0, t1, 0, t1, 0, t1])
    assert t0 != t1  # the oracle earned its two turns differently from the idle rollout
    idle_plan = plan_segments(idle_messages, idle.actions, tool_names(idle))
    assert rollout_token_advantages(
        credit="turn", mask=[1], plan=idle_plan, values=values[1]
    ) == pytest.approx([values[1][0]])


def test_one_turn_episodes_get_the_trajectory_advantage():
    """With one turn per episode, per-turn credit is the episode's group advantage (TRL's
    ``scale_rewards="group"`` formula, the engine's ``group_advantages``), whatever gamma."""
    rewards = [1.0, 0.2, 0.2, 0.6]
    rollouts = [{"grading": {}, "turn_rewards": [r], "engine_calls": 0} for r in rewards]
    for scale, method in ((True, "grpo"), (False, "dr_grpo")):
        values = group_values(rollouts, credit="turn", group_size=4, gamma=0.3, scale=scale)
        assert [v[0] for v in values] == pytest.approx(group_advantages(rewards, method))


def test_trajectory_credit_is_trls_own_trainer():
    trl = pytest.importorskip("trl")
    from apps.training.credit import trainer_class

    assert trainer_class("trajectory") is trl.GRPOTrainer  # TRL's advantages, unchanged
    for credit in ("turn", "call"):
        cls = trainer_class(credit, gamma=0.5)
        assert issubclass(cls, trl.GRPOTrainer) and cls is not trl.GRPOTrainer
    with pytest.raises(ValueError, match="unknown credit"):
        trainer_class("episode")


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"credit": "turn", "reward": "passed"}, "credit"),
        ({"credit": "call", "advantage": "rloo"}, "credit"),
        ({"credit": "turn", "advantage": "batch"}, "credit"),
        ({"credit": "episode"}, "credit"),
        ({"gamma": 1.5}, "gamma"),
    ],
)
def test_credit_hyperparameters_are_checked(given, field):
    with pytest.raises(HyperparameterError) as caught:
        validate_grpo_hyperparameters(given)
    assert field in caught.value.errors


def test_credit_defaults_to_trajectory():
    hp = validate_grpo_hyperparameters({})
    assert (hp["credit"], hp["gamma"]) == ("trajectory", 1.0)
    hp = validate_grpo_hyperparameters({"credit": "call", "gamma": 0.9, "advantage": "dr_grpo"})
    assert (hp["credit"], hp["gamma"], hp["advantage"]) == ("call", 0.9, "dr_grpo")


def test_grpo_job_with_per_turn_credit_trains_and_logs_rewards(
    project, author, sample_environments, settings
):
    """Two steps of ``grpo`` with ``credit=turn`` (gamma 0.5) on the two-turn eval task: the
    subclass's (B, T) advantages go through TRL's loss, every step's reward is logged, and
    the job's config keeps the credit."""
    pytest.importorskip("trl")
    import json
    from pathlib import Path

    from apps.training.services import training_job_create

    settings.TRAINING_LAUNCHER = "python"
    training_job = training_job_create(
        project=project,
        user=author,
        method="grpo",
        backend="local",
        environments=[sample_environments[0]],
        task_split="eval",
        preset="tiny-cpu",
        hyperparameters={
            "max_steps": 2, "max_completion_length": 16, "credit": "turn", "gamma": 0.5,
        },
        name="GRPO per-turn",
    )  # fmt: skip
    job = execute_and_succeed(training_job)  # what the gpu-queue task does
    assert job.message == "Trained 2 GRPO steps."
    metrics = list(training_job.metrics.order_by("step"))
    assert [m.step for m in metrics] == [1, 2]
    for m in metrics:  # the untrained model's random replies score like doing nothing
        assert m.reward == pytest.approx(0.2) and m.pass_rate == 0.0
        assert m.completion_length == 16.0 and m.loss == 0.0
    config = json.loads(Path(training_job.artifacts["config_path"]).read_text())
    hp = config["hyperparameters"]
    assert (hp["credit"], hp["gamma"], hp["reward"], hp["advantage"]) == ("turn", 0.5, "score",
                                                                         "grpo")  # fmt: skip
    assert training_job.hyperparameters["credit"] == "turn"
    assert training_job.rl_label() == f"#{training_job.pk} score/grpo G2 T1 turn {GAMMA}0.5"
    # the subclass replaced TRL's advantages on every batch (one per step here)
    assert training_job.log_tail.count("credit turn: 2 rollouts, 2 model segments") >= 2


def test_call_spans_on_the_tiny_presets_tokens(tmp_path):
    """The spans on real tokens: a Qwen2.5-style message with two tool calls, tokenized by the
    tiny preset's byte-level tokenizer (what the CPU runs train) and decoded one token at a
    time as the trainer does; each call's span holds its own JSON."""
    pytest.importorskip("trl")
    import json

    import transformers

    from apps.training.grpo import tokenizer_rows
    from apps.training.presets import build_text_preset

    directory = build_text_preset(tokenizer_rows({ACME.name: ACME}), tmp_path / "tiny", 0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    first = {"name": "list_events", "arguments": {"start": "2026-03-02"}}
    second = {"name": "send_email", "arguments": {"to": ["dana@acme.test"], "subject": "Moved"}}
    text = "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in (first, second))
    ids = tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    pieces = [tokenizer.decode([t]) for t in ids]
    spans = call_spans(pieces, ["list_events", "send_email"])
    assert spans[0][0] == 0 and spans[0][1] == spans[1][0] and spans[1][1] == len(ids)
    one, two = ("".join(pieces[s:e]) for s, e in spans)
    assert '"list_events"' in one and "2026-03-02" in one and "send_email" not in one
    assert '"send_email"' in two and "dana@acme.test" in two and two.endswith("<|im_end|>")


def test_the_server_environment_records_the_same_turns_and_calls():
    """``recording_class`` over the environment-server class (``env_server`` mode): the same
    record, call count and turn rewards as in process."""
    pytest.importorskip("uvicorn")
    from apps.training.grpo import remote_environment_class
    from coworkenv_engine.server import create_app
    from tests.engine.serving import running

    local = recording_class(environment_class(ACME, faults=False))()
    local.reset(task_key=TASK, seed=0)
    _drive(local, True)
    with running(create_app([ACME], token="tok")) as base:
        remote = recording_class(
            remote_environment_class(ACME, url=base, token="tok", faults=False)
        )()
        remote.reset(task_key=TASK, seed=0)
        _drive(remote, True)
        remote._close()
    assert remote.actions == local.actions and remote.engine_calls == local.engine_calls == 4
    assert rollout_credit(remote) == rollout_credit(local)


def _scripted_trainer(credit: str, tmp_path):
    """A credit trainer on the tiny preset whose sampling follows a script: the untrained model
    never emits a tool call, so ``_generate_single_turn`` returns the tokens of the oracle's
    tool calls for rollout 0, and for rollout 1 only the first turn's call, the turn's end
    and an early final reply. Everything else (TRL's tool loop, parsing, masks, the
    environments, grading, the loss) is the real thing."""
    import json

    import datasets
    import transformers

    from apps.training.credit import trainer_class
    from apps.training.grpo import grpo_config, make_reward, task_dataset_rows, tokenizer_rows
    from apps.training.hyperparameters import validate_grpo_hyperparameters
    from apps.training.presets import build_text_preset

    base = build_text_preset(tokenizer_rows({ACME.name: ACME}), tmp_path / "tiny", 0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base, padding_side="left")
    task = ACME.task(TASK)
    oracle = []
    for i, step in enumerate(task.reference_solution):
        oracle += [{"name": c.tool, "arguments": c.arguments} for c in step.calls]
        if i < len(task.turns) - 1:
            oracle.append({"name": "reply_to_user", "arguments": {"message": step.reply or "ok"}})

    def tokens(calls, final):
        texts = [f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls] + [final]
        return [tokenizer(t + "<|im_end|>", add_special_tokens=False)["input_ids"] for t in texts]

    scripts = [
        tokens(oracle, task.reference_solution[-1].reply or "Done."),
        tokens(oracle[:2], "Done."),
    ]
    hp = validate_grpo_hyperparameters(
        {"credit": credit, "gamma": 0.5, "beta": 0.0, "max_completion_length": 4096,
         "max_tool_calls": 10, "advantage": "dr_grpo"},
        preset="tiny-cpu",
    )  # fmt: skip

    class Scripted(trainer_class(credit, gamma=0.5, scale=False)):
        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            if not any(getattr(self, "_queues", [])):  # a new batch: both rollouts
                self._queues = [list(script) for script in scripts]
                self._active = [0, 1]
            assert len(prompt_ids) == len(self._active)
            out = [self._queues[i].pop(0) for i in self._active]
            # TRL goes on generating for the rollouts that called a tool, in order
            self._active = [i for i in self._active if self._queues[i]]
            return out, None

    env_class = environment_class(ACME, faults=False)
    if credit != "trajectory":  # as grpo.run does
        env_class = recording_class(env_class)
    rows = task_dataset_rows({ACME.name: ACME}, "eval")
    trainer = Scripted(
        model=transformers.AutoModelForCausalLM.from_pretrained(base),
        reward_funcs=[make_reward("score", 2)],
        args=grpo_config(hp, tmp_path / "out", use_cuda=False),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory={ACME.name: env_class},
    )
    trainer.model.train()
    return trainer, [dict(rows[0]), dict(rows[0])]


@pytest.mark.parametrize("credit", ["turn", "call"])
def test_trls_tool_loop_gets_the_engines_advantage_on_each_turns_and_calls_tokens(credit, tmp_path):
    pytest.importorskip("trl")
    trainer, inputs = _scripted_trainer(credit, tmp_path)
    output = trainer._generate_and_score_completions(inputs)
    good, partial = trainer.environments
    assert good.grading["score"] == 1.0 and partial.grading["score"] < 1.0
    assert [a["tool"] for a in good.actions] == [
        "create_event", "reply_to_user", "list_events", "update_event", "send_email",
    ]  # fmt: skip
    assert [a["tool"] for a in partial.actions] == ["create_event", "reply_to_user"]
    advantages = output["advantages"]
    mask = output["completion_mask"] * output["tool_mask"]
    assert advantages.shape == output["completion_ids"].shape  # (B, T)
    runs = [model_segments(row) for row in mask.tolist()]
    assert [len(r) for r in runs] == [6, 3]  # one run of model tokens per generation

    # The engine's own numbers for this group, from the episodes' gradings and audit logs.
    table = _engine_table(good, partial)
    if credit == "turn":
        (a0, a1), (b0, b1) = table["turn_advantages"]["dr_grpo"]
        # create_event, reply | list_events, update_event, send_email, final reply
        expected = [[a0, a0, a1, a1, a1, a1], [b0, b0, b1]]
    else:
        c, d = table["call_advantages"]["dr_grpo"]
        expected = [[c[0], 0.0, c[1], c[2], c[3], 0.0], [d[0], 0.0, 0.0]]  # replies take 0
    assert all(any(v != 0 for v in row) for row in expected)
    for i in range(2):
        for (start, end), value in zip(runs[i], expected[i], strict=True):
            assert advantages[i, start:end].tolist() == pytest.approx([value] * (end - start))
    assert (advantages * (1 - mask)).abs().sum() == 0  # tool results and padding: 0
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets
    loss = trainer.compute_loss(trainer.model, output)  # TRL's loss takes the (B, T) tensor
    assert loss.dim() == 0 and loss.isfinite()


def test_trajectory_credit_keeps_trls_advantages(tmp_path):
    """``credit=trajectory`` is TRL's trainer untouched: one advantage per rollout, TRL's
    r - group mean (dr_grpo), the engine's ``group_advantages`` on the scores."""
    pytest.importorskip("trl")
    trainer, inputs = _scripted_trainer("trajectory", tmp_path)
    output = trainer._generate_and_score_completions(inputs)
    scores = [env.grading["score"] for env in trainer.environments]
    assert output["advantages"].shape == (2,)
    assert output["advantages"].tolist() == pytest.approx(group_advantages(scores, "dr_grpo"))
    assert not hasattr(trainer.environments[0], "actions")  # no recording either
