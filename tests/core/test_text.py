from apps.core.text import count_of


def test_count_of_agrees_with_the_number():
    assert count_of(0, "problem") == "0 problems"
    assert count_of(1, "problem") == "1 problem"
    assert count_of(2, "problem") == "2 problems"
    assert count_of(1, "reply", "replies") == "1 reply"
    assert count_of(3, "reply", "replies") == "3 replies"
