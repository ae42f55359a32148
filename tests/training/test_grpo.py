"""GRPO on the CPU with the environment in the loop: the local backend runs
``apps.training.grpo`` (TRL's GRPOTrainer, the tiny preset model, one sample task) through
``accelerate launch``; every step's reward, pass rate, within-group std, KL and episode length
land in the job's metrics. And the reward function on rollouts with known gradings."""

import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("trl")  # the `train` extra

from apps.training.grpo import make_reward, reward_scale, task_dataset_rows
from apps.training.models import ModelKind, TrainedModel
from apps.training.services import training_job_create
from coworkenv_engine.rewards import group_advantages, sample_std
from coworkenv_engine.spec import load_spec
from coworkenv_engine.trl_env import OVER, environment_class
from tests.engine.helpers import SAMPLES, load_json
from tests.training.conftest import execute_and_succeed

ACME = load_spec(load_json(SAMPLES[0]))
EVAL_TASK = "notice-moved-dentist"  # Acme's only eval task; doing nothing scores 0.2


def test_grpo_job_trains_with_the_environment_in_the_loop(
    project, author, sample_environments, settings
):
    # `python -m` instead of `accelerate launch` (one process less on two shared cores; the
    # SFT test covers the launcher).
    settings.TRAINING_LAUNCHER = "python"
    acme = sample_environments[0]
    assert acme.name == ACME.name
    training_job = training_job_create(
        project=project,
        user=author,
        method="grpo",
        backend="local",
        environments=[acme],
        task_split="eval",
        preset="tiny-cpu",
        hyperparameters={"max_steps": 2, "max_completion_length": 16},
        name="GRPO smoke",
    )
    assert training_job.total_steps == 2 and training_job.dataset_version is None

    job = execute_and_succeed(training_job)  # what the gpu-queue task does
    assert job.message == "Trained 2 GRPO steps."
    assert training_job.command.split()[1:3] == ["-m", "apps.training.grpo"]
    metrics = list(training_job.metrics.order_by("step"))
    assert [m.step for m in metrics] == [1, 2]
    for m in metrics:
        # The untrained model never calls a tool: both rollouts of the group end the episode
        # with a random reply, which the engine grades like doing nothing.
        assert m.reward == pytest.approx(0.2) and m.score == pytest.approx(0.2)
        assert (m.pass_rate, m.strict_rate, m.group_reward_std, m.reward_std) == (0, 0, 0, 0)
        assert m.kl == 0.0  # beta 0.04: a reference model; no advantage moved the policy
        assert m.completion_length == 16.0
        assert m.loss == 0.0
    assert training_job.last_reward == pytest.approx(0.2)
    assert "[coworkenv] step 2 · loss 0 · learning_rate 0.001 · reward 0.2" in (
        training_job.log_tail
    )

    config = json.loads(Path(training_job.artifacts["config_path"]).read_text())
    assert config["method"] == "grpo" and config["split"] == "eval"
    [entry] = config["environments"]
    assert (entry["id"], entry["name"]) == (acme.pk, acme.name)
    spec_file = Path(entry["spec_file"])
    digest = hashlib.sha256(spec_file.read_bytes()).hexdigest()
    assert training_job.artifacts["data_sha256"] == {acme.name: digest}
    assert training_job.artifacts["trained_on_sha256"] == {acme.name: digest}
    assert config["hyperparameters"]["group_size"] == 2
    assert config["hyperparameters"]["advantage"] == "grpo"
    model = TrainedModel.objects.get(training_job=training_job)
    assert model.kind == ModelKind.FULL
    assert model.path == str(Path(training_job.output_dir) / "final")


def _oracle_rollout(task_key: str):
    """An environment instance driven through the oracle's tool calls, as TRL would call the
    tools; its final reply is returned as the completion."""
    env = environment_class(ACME, faults=False)()
    env.reset(task_key=task_key, seed=0)
    task = ACME.task(task_key)
    final = ""
    for i, step in enumerate(task.reference_solution):
        for call in step.calls:
            getattr(env, call.tool)(**call.arguments)
        if i < len(task.turns) - 1:
            env.reply_to_user(step.reply or "Done.")
        else:
            final = step.reply or "Done."
    return env, [{"role": "assistant", "content": final}]


def _idle_rollout(task_key: str):
    env = environment_class(ACME, faults=False)()
    env.reset(task_key=task_key, seed=0)
    return env, [{"role": "assistant", "content": "Done."}]


@pytest.mark.parametrize(
    ("variant", "expected"),
    [("score", [1.0, 0.2]), ("raw", [1.0, 0.2]), ("passed", [1.0, 0.0]), ("strict", [1.0, 0.0])],
)
def test_reward_variants_on_a_group_of_known_outcomes(variant, expected):
    (good, good_c), (idle, idle_c) = _oracle_rollout(EVAL_TASK), _idle_rollout(EVAL_TASK)
    logged: list[tuple[str, float]] = []
    reward = make_reward(variant, group_size=2)
    rewards = reward(
        [good_c, idle_c], [good, idle], log_metric=lambda name, value: logged.append((name, value))
    )
    assert rewards == pytest.approx(expected)
    assert reward.__name__ == f"coworkenv_{variant}"
    assert dict(logged) == pytest.approx(
        {
            "pass_rate": 0.5,
            "strict_rate": 0.5,
            "score": 0.6,
            "group_reward_std": sample_std(expected),
            "reward_mean": sum(expected) / 2,
        }
    )


def test_reward_of_other_environments_is_none_and_groups_are_split_by_g():
    envs, completions = [], []
    for _ in range(2):
        env, c = _oracle_rollout(EVAL_TASK)
        envs.append(env)
        completions.append(c)
    for _ in range(2):
        env, c = _idle_rollout(EVAL_TASK)
        envs.append(env)
        completions.append(c)
    logged: list[tuple[str, float]] = []
    rewards = make_reward("passed", group_size=2)(
        [*completions, "x"], [*envs, object()], log_metric=lambda *a: logged.append(a)
    )
    assert rewards == [1.0, 1.0, 0.0, 0.0, None]
    assert [v for n, v in logged if n == "group_reward_std"] == []  # 5 rollouts: no whole groups
    logged.clear()
    make_reward("passed", group_size=2)(completions, envs, log_metric=lambda *a: logged.append(a))
    assert [v for n, v in logged if n == "group_reward_std"] == [0.0, 0.0]


def test_dataset_rows_name_environment_and_task():
    rows = task_dataset_rows({"Acme": ACME}, "train")
    assert [(r["environment"], r["task_key"], r["seed"]) for r in rows] == [
        ("Acme", t.key, 0) for t in ACME.tasks if t.split == "train"
    ]
    assert task_dataset_rows({"Acme": ACME}, "")[-1]["task_key"] == ACME.tasks[-1].key
    with pytest.raises(ValueError, match="no eval task"):
        task_dataset_rows({"Acme": load_spec({**load_json(SAMPLES[0]), "tasks": [
            t for t in load_json(SAMPLES[0])["tasks"] if t.get("split", "train") == "train"
        ]})}, "eval")  # fmt: skip


def test_rollouts_through_the_environment_server_get_the_same_rewards():
    """The ``env_server`` mode: the same tool calls through a real server (OpenEnv's session
    socket, token in the path) give the same rewards and gradings as in process."""
    pytest.importorskip("uvicorn")
    from apps.training.grpo import EnvServerError, remote_environment_class, ws_url
    from coworkenv_engine.server import create_app
    from tests.engine.serving import running

    assert ws_url("https://h:1/base/", "tok") == "wss://h:1/base/t/tok/ws"
    assert ws_url("http://h:1", None) == "ws://h:1/ws"
    with running(create_app([ACME], token="tok")) as base:
        remote = remote_environment_class(ACME, url=base, token="tok", faults=False)
        good, idle = remote(), remote()
        for env in (good, idle):
            env.reset(task_key=EVAL_TASK, seed=0)
        local_good, good_c = _oracle_rollout(EVAL_TASK)
        task = ACME.task(EVAL_TASK)
        for i, step in enumerate(task.reference_solution):
            for call in step.calls:
                getattr(good, call.tool)(**call.arguments)
            if i < len(task.turns) - 1:
                good.reply_to_user(step.reply or "Done.")
        local_idle, idle_c = _idle_rollout(EVAL_TASK)
        rewards = make_reward("score", group_size=2)([good_c, idle_c], [good, idle])
        expected = make_reward("score", group_size=2)([good_c, idle_c], [local_good, local_idle])
        assert rewards == expected == pytest.approx([1.0, 0.2])
        assert good.grading == local_good.grading and idle.turn_rewards == local_idle.turn_rewards
        assert good.reply_to_user("more?") == OVER
        good.reset(task_key=EVAL_TASK, seed=0)  # the pooled instance starts afresh
        assert good.grading is None
        wrong = remote_environment_class(ACME, url=base, token="tok", faults=False)()
        with pytest.raises(EnvServerError, match="EXECUTION_ERROR: no task 'no-such-task'"):
            wrong.reset(task_key="no-such-task")
        for env in (good, idle, wrong):
            env._close()


def test_rloo_through_trl_is_the_leave_one_out_advantage():
    """advantage=rloo: TRL is told scale_rewards="none" (advantage r' - mean r') and sees the
    rewards x G/(G-1); that is r - mean of the other rollouts. Group [oracle, idle, idle]:
    rewards [1, 0.2, 0.2] -> TRL sees [1.5, 0.3, 0.3], mean 0.7 -> [0.8, -0.4, -0.4] =
    [1 - 0.2, 0.2 - 0.6, 0.2 - 0.6]."""
    hp = {"group_size": 3, "advantage": "rloo"}
    assert reward_scale(hp) == 1.5 and reward_scale({**hp, "advantage": "grpo"}) == 1.0
    rollouts = [_oracle_rollout(EVAL_TASK), _idle_rollout(EVAL_TASK), _idle_rollout(EVAL_TASK)]
    logged: list[tuple[str, float]] = []
    seen = make_reward("score", 3, scale=reward_scale(hp))(
        [c for _, c in rollouts], [e for e, _ in rollouts], log_metric=lambda *a: logged.append(a)
    )
    assert seen == pytest.approx([1.5, 0.3, 0.3])
    trl_advantages = [r - sum(seen) / 3 for r in seen]
    assert trl_advantages == pytest.approx([0.8, -0.4, -0.4])
    assert trl_advantages == pytest.approx(group_advantages([1.0, 0.2, 0.2], "rloo"))
    assert dict(logged)["reward_mean"] == pytest.approx(1.4 / 3)  # reported unscaled


def test_a_view_tools_image_through_the_server_reaches_trl_as_an_image_block():
    """The ``env_server`` mode with an image environment: the server's ``data:`` URL comes
    back from the tool method as TRL's ``{"type": "image", "image": <PIL image>}`` block."""
    pytest.importorskip("uvicorn")
    from PIL import Image

    from apps.training.grpo import remote_environment_class
    from coworkenv_engine.server import create_app
    from tests.engine.serving import running
    from tests.engine.test_attachments import FILES, PNG_SHA, image_spec

    spec = load_spec(image_spec())
    with running(create_app([spec], token="tok", attachments=FILES.get)) as base:
        env = remote_environment_class(spec, url=base, token="tok", faults=False)()
        env.reset(task_key="file-rc-1")
        text, image = env.view_receipt(receipt_id="rc-1")
        env._close()
    assert json.loads(text["text"])["image"] == f"sha256:{PNG_SHA}"
    assert image["type"] == "image" and isinstance(image["image"], Image.Image)
    assert image["image"].getpixel((1, 1)) == (255, 0, 0)
