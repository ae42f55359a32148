"""A model's answer holding text the database cannot store (issue 10).

A model (or a server posing as one) may answer with NUL characters or lone UTF-16 surrogates,
as ``\\u0000`` and ``\\ud800`` escapes in its JSON. The client takes them in at its boundary as
U+FFFD, the replacement character, so the call log, transcripts and drafts that store the
answer never meet a ``DataError`` (PostgreSQL) or a ``UnicodeEncodeError``.
"""

import pytest

from apps.llm.client import llm_chat
from apps.llm.models import LLMCall, LLMCallStatus
from tests.llm_server import Reply

pytestmark = pytest.mark.django_db

HELLO = [{"role": "user", "content": "Say hi."}]


def test_nul_and_lone_surrogates_in_an_answer_are_replaced(endpoint, llm_server):
    llm_server.script(
        Reply.tools(("send\x00mail", {"to": "a\ud800b"}), content="Hi\x00 there\udfff.")
    )
    result = llm_chat(endpoint=endpoint, messages=HELLO, purpose="test.chat")
    assert result.content == "Hi\ufffd there\ufffd."
    [call] = result.tool_calls
    assert call["name"] == "send\ufffdmail"
    assert call["arguments"] == '{"to": "a\ufffdb"}'
    logged = LLMCall.objects.get()
    assert logged.status == LLMCallStatus.OK
    assert logged.response["content"] == "Hi\ufffd there\ufffd."
