"""The Claw-Eval export's judge checks: the harness's judge is shown what CoworkEnv's judge
would be, the check's declared context included (no Claw-Eval checkout needed: the
exported grader.py runs with a stand-in for the harness's ``LLMJudge``)."""

import json
from pathlib import Path

import yaml

from apps.environments.interop.claw_eval import export_files, task_id_for
from coworkenv_engine.spec import canonical_dump
from tests.environments.interop.support import (
    LOAD_GRADER,
    MockService,
    grade,
    replay_reference,
    write_tree,
)

ROOT = Path(__file__).resolve().parents[3]

JUDGED_SCRIPT = (
    LOAD_GRADER
    + """
class Result:
    score, reasoning = 1.0, "ok"

class Judge:  # Claw-Eval's LLMJudge.evaluate(task_prompt, conversation, actions, rubric)
    asked = []
    def evaluate(self, prompt, conversation, actions, rubric):
        self.asked.append({"prompt": prompt, "conversation": conversation,
                           "actions": json.loads(actions), "rubric": rubric})
        return Result()

judge = Judge()
cls().grade(payload["messages"], [], None, audit_data=payload["audit"], judge=judge)
print(json.dumps({a["rubric"]: a for a in judge.asked}))
"""
)

DEFAULT = "The reply gives the booked time."
DECLARED = "The email to Dana gives the booked time."


def _export(tmp_path: Path) -> tuple[Path, dict]:
    spec = json.loads((ROOT / "samples" / "acme-ops.json").read_text())
    spec["tasks"] = spec["tasks"][:1]
    spec["tasks"][0]["graders"] += [
        {"id": "judged-default", "category": "communication",
         "check": {"kind": "judge", "rubric": DEFAULT}},
        {"id": "judged-declared", "category": "communication",
         "check": {"kind": "judge", "rubric": DECLARED,
                   "context": {"messages": "final", "calls": False, "state": ["email.sent"]}}},
    ]  # fmt: skip
    document = canonical_dump(spec)
    root = write_tree(export_files(document), tmp_path / "export")
    return root / "tasks" / task_id_for(document, spec["tasks"][0]["key"]), document


def _asked(tmp_path: Path) -> tuple[dict, dict]:
    task_dir, document = _export(tmp_path)
    with MockService(task_dir.parents[1], task_dir, {"COWORKENV_FAULTS": "0"}) as service:
        messages, _ = replay_reference(service)
        audit = service.audit()
    return grade(task_dir, messages, audit, tmp_path, script=JUDGED_SCRIPT), document


def test_the_harness_judge_is_shown_the_declared_context_only(tmp_path):
    asked, document = _asked(tmp_path)
    task = document["tasks"][0]
    reply = task["reference_solution"][-1]["reply"]
    # the default: the conversation from the prompt on, the calls and their changes
    default = asked[DEFAULT]
    assert default["prompt"] == task["turns"][0]["message"]
    assert default["conversation"].startswith("[USER]: ")
    assert default["conversation"].endswith(f"[ASSISTANT]: {reply}")
    assert set(default["actions"]) == {"calls", "changes"} and default["actions"]["calls"]
    # declared: the final reply and the sent emails, no prompt, no call, no other record
    declared = asked[DECLARED]
    assert declared["prompt"] == ""
    assert declared["conversation"] == f"[ASSISTANT]: {reply}"
    assert set(declared["actions"]) == {"state"}
    assert set(declared["actions"]["state"]) == {"email"}
    assert set(declared["actions"]["state"]["email"]) == {"sent"}
    assert declared["actions"]["state"]["email"]["sent"]


def test_task_yaml_says_what_a_declared_judge_is_shown(tmp_path):
    task_dir, _ = _export(tmp_path)
    data = yaml.safe_load((task_dir / "task.yaml").read_text())
    described = {c["name"]: c["check"]["description"] for c in data["scoring_components"]}
    assert described["judged-default"] == "judged-default"
    assert described["judged-declared"] == (
        "judged-declared (the judge is shown messages: final; no calls; records of email.sent)"
    )
    assert "declared context" in (task_dir / "grader.py").read_text()
