"""One module holds the word lists, and every "holds the answer" test reads the list named for its purpose."""

from __future__ import annotations

from memtrace_opt.attribution import NeededInfo
from memtrace_opt.memory.index import tokenize
from memtrace_opt.metrics import porter_stem
from memtrace_opt.metrics.text import content_recall
from memtrace_opt.optimizers.evaluation.carry import carries, gold_words
from memtrace_opt.testing.skills import content_tokens as chat_content_tokens
from memtrace_opt.text.words import CHAT_STOP_WORDS, FACT_STOP_WORDS, FUNCTION_WORDS, SCORING_STOP_WORDS


def test_the_lists_nest_as_documented() -> None:
    assert SCORING_STOP_WORDS | FACT_STOP_WORDS <= FUNCTION_WORDS
    assert FACT_STOP_WORDS <= CHAT_STOP_WORDS
    # the scoring list keeps what changes an answer's meaning
    assert not {"not", "no", "before", "after", "her", "his", "she"} & SCORING_STOP_WORDS
    assert all(word == word.lower() and " " not in word for word in FUNCTION_WORDS | CHAT_STOP_WORDS)


def test_search_and_attribution_drop_the_same_words() -> None:
    text = "What did she say about the trip to Lisbon with her brother in May"
    assert tokenize(text) == ["say", "about", "trip", "lisbon", "brother", "may"]
    assert NeededInfo("?", text).answer_tokens == frozenset(porter_stem(t) for t in tokenize(text))


def test_the_local_check_reads_attributions_words() -> None:
    for gold in ("They seem cheerful", "not after the concert", "her brother in Lisbon", "what she wanted"):
        assert gold_words(gold) == set(NeededInfo("?", gold).answer_tokens), gold
    # a negation is part of the answer for both: a reply without it carries nothing
    assert not carries("not after the concert", "after the concert")
    assert not NeededInfo("When did they meet?", "not after the concert").holds("after the concert")
    assert NeededInfo("When did they meet?", "not after the concert").holds("not after the concert")


def test_scoring_keeps_its_own_list() -> None:
    # "her" is a fact word for scoring ("her mother" is not "his mother"), a stop word for attribution
    assert content_recall("mother", "her mother") == 0.5
    assert "her" in FACT_STOP_WORDS and "her" not in SCORING_STOP_WORDS


def test_the_fake_lm_reads_chat_filler_as_no_content() -> None:
    assert chat_content_tokens("Oh yeah, thanks! We hiked the ridge") == ["hik", "ridg"]
