import pytest

from apps.llm.jsontext import JSONExtractionError, extract_json_object


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": {"b": [1, 2]}}\n', {"a": {"b": [1, 2]}}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```JSON\n{"a": 1}\n```\nDone.', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Here you go: {"a": "}{ in a string \\" quote"} — enjoy', {"a": '}{ in a string " quote'}),
        # A brace-y phrase before the object is skipped, not taken for it.
        ('Use {name} placeholders. {"a": 1}', {"a": 1}),
        # An object nested in an unparseable one is not the answer; the next object is.
        ('{"broken": {"inner": 1}, oops} {"a": 2}', {"a": 2}),
        # A fenced block wins over earlier prose objects.
        ('Example: {"x": 0}\n```json\n{"a": 3}\n```', {"a": 3}),
    ],
)
def test_extracts(text, expected):
    assert extract_json_object(text) == expected


def test_no_object():
    with pytest.raises(JSONExtractionError) as raised:
        extract_json_object("I cannot do that.\nSorry.")
    assert raised.value.message == "The answer contains no JSON object."
    assert raised.value.excerpt == "I cannot do that. Sorry."
    assert raised.value.truncated is False


def test_empty():
    with pytest.raises(JSONExtractionError, match="empty"):
        extract_json_object("   ")
    with pytest.raises(JSONExtractionError, match="empty"):
        extract_json_object(None)


def test_truncated():
    with pytest.raises(JSONExtractionError) as raised:
        extract_json_object('```json\n{"a": [1, 2, {"b": "unfinished')
    assert raised.value.truncated is True
    assert "truncated" in raised.value.message


def test_balanced_but_invalid():
    with pytest.raises(JSONExtractionError) as raised:
        extract_json_object("{'single': 'quotes'}")
    assert raised.value.message.startswith("The answer's JSON object does not parse:")
    assert raised.value.excerpt == "{'single': 'quotes'}"


def test_long_excerpt_is_shortened():
    with pytest.raises(JSONExtractionError) as raised:
        extract_json_object("word " * 200)
    assert len(raised.value.excerpt) == 160
    assert raised.value.excerpt.endswith("…")
