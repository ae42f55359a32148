"""The engine distribution's own tests: the standard library's unittest only, so that a fresh
virtual environment with nothing but ``pip install ./engine`` runs them
(``python -m unittest discover -s engine/tests``); pytest collects them too.

They read the repository's samples (``samples/``, beside ``engine/``): the engine ships no
environments of its own.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from coworkenv_engine import rewards
from coworkenv_engine.policies import NullPolicy, OraclePolicy
from coworkenv_engine.runner import run_task
from coworkenv_engine.spec import load_spec
from coworkenv_engine.validation import validate_spec

SAMPLES = Path(os.environ.get("COWORKENV_SAMPLES", Path(__file__).resolve().parents[2] / "samples"))


def _sample(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text("utf-8"))


class SamplesTest(unittest.TestCase):
    def test_every_sample_validates_and_its_oracle_passes_strictly(self):
        paths = sorted(SAMPLES.glob("*.json"))
        self.assertGreaterEqual(len(paths), 3)
        for path in paths:
            doc = json.loads(path.read_text("utf-8"))
            report = validate_spec(doc)
            self.assertTrue(report.valid, (path.name, [p.to_dict() for p in report.problems]))
            spec = load_spec(doc)
            for task in spec.tasks:
                oracle = run_task(spec, task.key, OraclePolicy(), seed=0)
                self.assertEqual(oracle.grading.score, 1.0, (path.name, task.key))
                self.assertTrue(oracle.grading.strict, (path.name, task.key))
                null = run_task(spec, task.key, NullPolicy(), seed=0)
                self.assertFalse(null.grading.passed, (path.name, task.key))

    def test_a_broken_spec_is_refused_with_a_code_and_a_pointer(self):
        doc = _sample("acme-ops.json")
        doc["tasks"][0]["reference_solution"] = [{"tool": "no_such_tool", "arguments": {}}]
        report = validate_spec(doc, dynamic=False)
        self.assertFalse(report.valid)
        codes = {(p.code, p.pointer) for p in report.problems if p.severity == "error"}
        self.assertTrue(
            any(pointer.startswith("/tasks/0/reference_solution") for _, pointer in codes), codes
        )


class RewardsTest(unittest.TestCase):
    """The README's worked example: G = 4 rollouts with rewards [1, 0, 0, 0.5]."""

    def assert_close(self, got, expected):
        self.assertEqual(len(got), len(expected))
        for a, b in zip(got, expected, strict=True):
            self.assertTrue(math.isclose(a, b, abs_tol=1e-4), (got, expected))

    def test_group_advantages_match_the_worked_example(self):
        r = [1.0, 0.0, 0.0, 0.5]
        self.assert_close(rewards.group_advantages(r, "grpo"), [1.3053, -0.7832, -0.7832, 0.2611])
        self.assert_close(rewards.group_advantages(r, "dr_grpo"), [0.625, -0.375, -0.375, 0.125])
        self.assert_close(rewards.group_advantages(r, "rloo"), [0.8333, -0.5, -0.5, 0.1667])

    def test_one_rollout_and_equal_rewards_give_zero_advantage(self):
        for method in ("grpo", "dr_grpo", "rloo"):
            self.assert_close(rewards.group_advantages([0.7], method), [0.0])
            self.assert_close(rewards.group_advantages([1.0, 1.0, 1.0], method), [0.0, 0.0, 0.0])

    def test_reward_to_go(self):
        self.assert_close(rewards.reward_to_go([0, 0.5, 0, 1], 0.9), [1.179, 1.31, 0.9, 1.0])


class CommandLineTest(unittest.TestCase):
    def test_validate_exit_codes(self):
        with tempfile.TemporaryDirectory() as folder:
            broken = Path(folder) / "broken.json"
            broken.write_text("{not json", "utf-8")
            unreadable = subprocess.run(
                [sys.executable, "-m", "coworkenv_engine", "validate", str(broken)],
                capture_output=True,
                text=True,
                check=False,
            )
        self.assertEqual(unreadable.returncode, 2, unreadable.stdout + unreadable.stderr)
        self.assertIn("broken.json", unreadable.stdout + unreadable.stderr)
        ok = subprocess.run(
            [sys.executable, "-m", "coworkenv_engine", "validate", str(SAMPLES / "acme-ops.json")],
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)


if __name__ == "__main__":
    unittest.main()
