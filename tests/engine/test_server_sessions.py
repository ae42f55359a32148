"""Sessions belong to the token that opened them (defect 8 of issue 24): ids are chosen by
the server, another token's episode is not found (alike a closed one), and one token gets
only its share of the sessions."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect

from coworkenv_engine.server import create_app

from .serving import running
from .test_server import SPECS

TASK = SPECS[0].tasks[0].key


async def _two_tokens(given: str, client: str) -> bool:
    return given in ("alice", "bob")


@pytest.fixture(scope="module")
def url():
    app = create_app(SPECS[:1], authorise=_two_tokens, max_sessions=4, max_sessions_per_token=2)
    with running(app) as served:
        yield served


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _reset(url: str, token: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/reset", json={"task_key": TASK, **body}, headers=_as(token))


def _close(url: str, token: str, episode_id: str) -> httpx.Response:
    return httpx.post(f"{url}/close", json={"episode_id": episode_id}, headers=_as(token))


def test_another_tokens_episode_is_not_found_like_a_missing_one(url):
    episode_id = _reset(url, "alice").json()["observation"]["episode_id"]
    step = {"episode_id": episode_id, "action": {"reply": "Done."}}
    missing = {"episode_id": "0" * 32, "action": {"reply": "Done."}}
    theirs = httpx.post(f"{url}/step", json=step, headers=_as("bob"))
    nobody = httpx.post(f"{url}/step", json=missing, headers=_as("bob"))
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["detail"].replace(episode_id, "<id>") == nobody.json()["detail"].replace(
        "0" * 32, "<id>"
    )
    state = httpx.get(f"{url}/state", params={"episode_id": episode_id}, headers=_as("bob"))
    assert state.status_code == 404
    assert _close(url, "bob", episode_id).status_code == 404
    assert _reset(url, "bob", episode_id=episode_id).status_code == 404  # no restart of it
    # alice's episode is as it was, and hers to step, restart and close
    mine = httpx.post(f"{url}/step", json=step, headers=_as("alice"))
    assert mine.status_code == 200 and mine.json()["observation"]["turn_ended"] is True
    restarted = _reset(url, "alice", episode_id=episode_id).json()["observation"]
    assert restarted["episode_id"] == episode_id
    assert _close(url, "alice", episode_id).json() == {"episode_id": episode_id, "closed": True}


def test_a_client_chosen_episode_id_is_not_taken(url):
    chosen = _reset(url, "alice", episode_id="my-own-name")
    assert chosen.status_code == 404 and chosen.json()["code"] == "NOT_FOUND"
    given = _reset(url, "alice").json()["observation"]["episode_id"]
    assert given != "my-own-name" and len(given) == 32
    assert _close(url, "alice", given).status_code == 200
    bad = _reset(url, "alice", episode_id=7)
    assert bad.status_code == 422


def test_one_token_gets_its_share_of_the_sessions_and_the_others_theirs(url):
    opened = [_reset(url, "alice").json()["observation"]["episode_id"] for _ in range(2)]
    third = _reset(url, "alice")
    assert third.status_code == 503
    assert third.json() == {
        "detail": "session limit of this token reached",
        "code": "CAPACITY_REACHED",
    }
    ws_url = url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, additional_headers=_as("alice")) as ws:
        refused = json.loads(ws.recv(timeout=30))
    assert refused["data"]["message"] == "session limit of this token reached"
    bobs = [_reset(url, "bob").json()["observation"]["episode_id"] for _ in range(2)]
    assert len(set(bobs)) == 2
    for episode_id in opened:
        assert _close(url, "alice", episode_id).status_code == 200
    for episode_id in bobs:
        assert _close(url, "bob", episode_id).status_code == 200
    assert _reset(url, "alice").status_code == 200


def _oracle_http(url: str, token: str, **reset) -> dict:
    """The oracle's episode over HTTP; the final observation."""
    from coworkenv_engine.adversaries import policy_by_name

    from .drive import play
    from .test_server import unwire

    spec = SPECS[0]
    first = _reset(url, token, seed=2, **reset)
    assert first.status_code == 200, first.text
    episode_id = first.json()["observation"]["episode_id"]

    def step(action):
        r = httpx.post(
            f"{url}/step", json={"episode_id": episode_id, "action": action}, headers=_as(token)
        )
        assert r.status_code == 200, r.text
        return unwire(r.json())

    seen = play(spec, TASK, policy_by_name("oracle"), unwire(first.json()), step)
    assert _close(url, token, episode_id).status_code == 200
    return seen[-1]


def test_the_graders_evidence_is_shown_only_to_a_trainer_that_asks(url):
    """The final observation names the verdicts and their status; the evidence (check
    queries, what they found) only with ``"evidence": true`` at reset."""
    from coworkenv_engine.adversaries import policy_by_name
    from coworkenv_engine.runner import run_task

    expected = run_task(SPECS[0], TASK, policy_by_name("oracle"), seed=2).grading.to_dict()
    assert any(v["evidence"] for v in expected["verdicts"])
    plain = _oracle_http(url, "alice")["grading"]
    assert all("evidence" not in v for v in plain["verdicts"])
    assert [v["grader_id"] for v in plain["verdicts"]] == [
        v["grader_id"] for v in expected["verdicts"]
    ]
    assert plain["score"] == expected["score"]
    assert _oracle_http(url, "alice", evidence=True)["grading"] == expected
    assert _reset(url, "alice", evidence="yes").status_code == 422


def test_an_authorise_that_cannot_decide_is_503_over_http_and_websocket():
    from websockets.exceptions import InvalidStatus

    from coworkenv_engine.server import Unavailable

    async def down(given: str, client: str) -> bool:
        raise Unavailable("the database is unavailable")

    with running(create_app(SPECS[:1], authorise=down)) as served:
        response = httpx.get(f"{served}/tasks", headers=_as("alice"))
        assert (response.status_code, response.json()) == (
            503,
            {"detail": "the database is unavailable", "code": "UNAVAILABLE"},
        )
        with pytest.raises(InvalidStatus) as refused:
            connect(served.replace("http://", "ws://") + "/ws", additional_headers=_as("alice"))
        assert refused.value.response.status_code == 503
        assert httpx.get(f"{served}/health").status_code == 200
