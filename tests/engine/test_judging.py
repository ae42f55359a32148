"""The engine's judge: the verdict's parsing, ``HttpJudge`` against an OpenAI-compatible
server on loopback, and ``coworkenv-env validate --judge URL``."""

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coworkenv_engine.cli import main
from coworkenv_engine.judging import HttpJudge, JudgeError, judge_messages, parse_verdict
from tests.llm_server import LoopbackLLMServer, Reply, judge_responder

from .helpers import mini_doc

KEY = "sk-judge-test"
RUBRIC = 'The reply must say the review is booked on "Thursday".'


def judged_doc() -> dict:
    doc = mini_doc()
    doc["tasks"][0]["graders"].append(
        {
            "id": "judged",
            "category": "communication",
            "weight": 1,
            "check": {"kind": "judge", "rubric": RUBRIC, "threshold": 0.75},
        }
    )
    return doc


CONTEXT = {"task": "book", "messages": [], "final_reply": "Booked for Thursday.", "audit": []}


@given(st.floats(min_value=0, max_value=1), st.text(max_size=40))
def test_a_verdict_in_prose_or_fences_is_read(score, reasoning):
    text = f"Here it is:\n```json\n{json.dumps({'score': score, 'reasoning': reasoning})}\n```"
    assert parse_verdict(text) == {"score": score, "reasoning": reasoning}


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("I think it is fine.", "no JSON object"),
        ('{"score": 1.5, "reasoning": "x"}', "from 0 to 1"),
        ('{"score": true, "reasoning": "x"}', "from 0 to 1"),
        ('{"score": "high"}', "from 0 to 1"),
        ('{"score": 0.5', "no JSON object"),
    ],
)
def test_an_unusable_verdict_says_what_is_wrong(answer, says):
    with pytest.raises(JudgeError, match=says):
        parse_verdict(answer)


def test_the_http_judge_asks_once_per_evidence_with_its_key():
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        judge = HttpJudge(server.base_url, model="loopback-model", api_key=KEY)
        first = judge(RUBRIC, CONTEXT)
        again = judge(RUBRIC, CONTEXT)
        other = judge(RUBRIC, {**CONTEXT, "final_reply": "Done."})
    assert first == again and first["score"] == 1.0 and first["model"] == "loopback-model"
    assert other["score"] == 0.0
    assert judge.calls == len(server.requests) == 2
    request = server.requests[0]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["temperature"] == 0
    assert request.messages == judge_messages(RUBRIC, {**_evidence(CONTEXT)})


def _evidence(context):
    from coworkenv_engine.judging import judge_evidence

    return judge_evidence(context)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply.error(500, "down"), "HTTP 500"),
        (Reply.garbage(), "failed"),
        (Reply.text("no verdict here"), "no JSON object"),
    ],
)
def test_a_failing_judge_endpoint_raises_a_judge_error(reply, says):
    with LoopbackLLMServer(api_key=KEY, responder=lambda request: reply) as server:
        judge = HttpJudge(server.base_url, model="loopback-model", api_key=KEY)
        with pytest.raises(JudgeError, match=says):
            judge(RUBRIC, CONTEXT)


def test_a_wrong_key_is_an_http_error_not_a_verdict():
    with (
        LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server,
        pytest.raises(JudgeError, match="HTTP 401"),
    ):
        HttpJudge(server.base_url, model="loopback-model", api_key="wrong")(RUBRIC, CONTEXT)


def _validate(path, *argv):
    out = io.StringIO()
    code = main(["validate", str(path), "--json", *argv], out=out)
    return code, json.loads(out.getvalue())


def test_validate_with_a_judge_runs_every_agent_through_it(tmp_path, monkeypatch):
    path = tmp_path / "judged.json"
    path.write_text(json.dumps(judged_doc()))
    _, without = _validate(path)
    assert "judge_not_certified" in {p["code"] for p in without["problems"]}
    monkeypatch.setenv("COWORKENV_JUDGE_API_KEY", KEY)
    with LoopbackLLMServer(api_key=KEY, responder=judge_responder()) as server:
        _, judged = _validate(path, "--judge", server.base_url, "--judge-model", "m")
        replies = {json.loads(r.messages[-1]["content"])["final_reply"] for r in server.requests}
    assert "judge_not_certified" not in {p["code"] for p in judged["problems"]}
    # not the reference alone: the agents that do nothing, parrot or game were judged too
    assert "Done." in replies and len(replies) >= 3
    assert {r.body["model"] for r in server.requests} == {"m"}


def test_validate_refuses_a_judge_that_is_not_a_url(tmp_path, capsys):
    path = tmp_path / "judged.json"
    path.write_text(json.dumps(judged_doc()))
    with pytest.raises(SystemExit) as exc:
        main(["validate", str(path), "--judge", "localhost:8000"])
    assert exc.value.code == 2
    assert "not an http(s) URL" in capsys.readouterr().err
