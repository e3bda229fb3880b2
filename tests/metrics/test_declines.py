"""The one decline rule: a reply whose whole content declines, against an answer that merely holds such a word."""

from __future__ import annotations

import pytest

from memtrace_opt.data import Question
from memtrace_opt.metrics import is_decline, score_answer

DECLINES = [
    # short declines, whatever their case, punctuation, quotes, lead-in or pointer to the source
    "None", "none.", "NONE", '"None"', "Answer: None", "None mentioned", "None given.",
    "N/A", "n/a", "NA", "Not applicable",
    "No answer", "No answer.", "No idea", "No information", "No info available",
    "Unknown", "Unknown.", "It is unknown.", "The answer is unknown", "Unknown from the conversation",
    "Not mentioned", "Not mentioned in the conversation.", "Not specified.", "Not provided in the context",
    "Not available", "Not known", "It's not clear from the context", "Unclear", "Unsure", "Unanswerable",
    "I don\u2019t know.", "Cannot say",
    # a statement that the source lacks the information, anywhere in the reply
    "There is no information about Maya's dog.",
    "It cannot be determined from the conversation.",
    "The conversation does not mention a dog.",
    "The conversation doesn't specify.",
    "The information given is not enough.",
    "Not enough information to answer.",
    "Insufficient information",
    "That is not mentioned; Theo is the one with a dog.",
    "None (not stated in the conversation)",
    "The context never says.",
    "Nothing is mentioned about a car.",
    "No mention of a pet",
    "It is not possible to tell from the conversation.",
    "Her age is unknown.",
    "The trip is not in the memory",
]

ANSWERS = [
    # answers holding a decline word
    "an unknown artist", "An unknown band from Leeds", "Unknown Pleasures", "the unknown soldier memorial",
    "none of them were hurt", "None of the above", "None, she walks to work",
    "not the red one", "Not yet", "Not since 2020", "not really, she prefers tea",
    "Nothing", "No one", "Nobody", "No", "No, the trip was cancelled", "He had no car",
    "The pool was not available that day", "Lunch was not provided", "She is not known for patience",
    # plain answers
    "Biscuit", "Denver, Colorado", "June 2023",
]


@pytest.mark.parametrize("reply", DECLINES)
def test_declines_in_many_forms(reply: str) -> None:
    assert is_decline(reply)


@pytest.mark.parametrize("reply", ANSWERS)
def test_answers_that_hold_a_decline_word_are_answers(reply: str) -> None:
    assert not is_decline(reply)


@pytest.mark.parametrize("reply", ["", "   ", None])
def test_an_empty_reply_is_no_decline(reply: str | None) -> None:
    assert not is_decline(reply)  # a failed call earns no abstention credit


def _question(answer: str, abstention: bool = False) -> Question:
    return Question("x:q0", "?", answer, "single-hop", None, ("D1:1",), abstention=abstention)


def test_scoring_reads_the_rule() -> None:
    abstain = _question("Not mentioned in the conversation", abstention=True)
    assert score_answer(abstain, "None").correct_by_rule  # a decline where declining is right
    assert score_answer(abstain, "N/A").abstained
    assert not score_answer(abstain, "An unknown artist").correct_by_rule  # an answer where declining is right
    artist = _question("an unknown artist")
    right = score_answer(artist, "An unknown artist")
    assert right.correct_by_rule and not right.abstained
    hurt = _question("none of them were hurt")
    assert score_answer(hurt, "None of them were hurt").correct_by_rule
    assert not score_answer(_question("Biscuit"), "None").correct_by_rule
