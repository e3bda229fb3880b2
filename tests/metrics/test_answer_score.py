"""Category-aware scoring: abstention, multi-hop, open-domain, the judge-free rule (declines: test_declines.py)."""

from __future__ import annotations

import pytest

from memtrace_opt.data import ABSTAIN_ANSWER, Question, load_sample
from memtrace_opt.metrics import AnswerScore, score_answer


def sample_question(text: str) -> Question:
    (conversation,) = load_sample().conversations
    return next(q for q in conversation.questions if q.question == text)


def make(answer: str, category: str = "single-hop", abstention: bool = False) -> Question:
    return Question("x:q0", "?", answer, category, None, ("D1:1",), abstention=abstention)


def test_adversarial_question_rewards_abstaining_only() -> None:
    question = sample_question("What is the name of Maya's dog?")
    assert question.answer == ABSTAIN_ANSWER
    right = score_answer(question, "That is not mentioned; Theo is the one with a dog.")
    assert (right.f1, right.bleu1, right.correct_by_rule, right.rule) == (1.0, 1.0, True, "abstention")
    wrong = score_answer(question, "Biscuit")  # the trap answer
    assert (wrong.f1, wrong.correct_by_rule, wrong.abstained) == (0.0, False, False)


def test_longmemeval_style_abstention() -> None:
    question = make("The conversation does not say enough. You never said ...", "knowledge-update", True)
    assert score_answer(question, "I don't know").correct_by_rule
    assert score_answer(question, "Six kayaks").f1 == 0.0


def test_multi_hop_uses_multi_answer_f1() -> None:
    question = sample_question("Which cities has Maya lived in?")
    full = score_answer(question, "Denver, Boston")
    assert (full.f1, full.rule, full.correct_by_rule) == (1.0, "multi-f1", True)
    half = score_answer(question, "Boston")  # gold parts boston (1.0) and denver (0.0): mean 0.5
    assert half.f1 == 0.5 and half.recall == 0.0
    assert not half.correct_by_rule  # F1 must exceed 0.5


def test_open_domain_scores_the_gold_before_the_semicolon() -> None:
    question = make("Colorado; Denver is the capital of Colorado", "open-domain")
    assert score_answer(question, "Colorado").f1 == 1.0


def test_verbose_but_right_answer_is_correct_by_rule() -> None:
    question = sample_question("When did Maya move to Denver?")  # gold "June 2023"
    score = score_answer(question, "Maya moved to Denver in June 2023")
    assert score.f1 == pytest.approx(4 / 9)  # see the hand-worked F1 in test_text_metrics
    assert score.recall == 1.0 and score.correct_by_rule


def test_abstaining_on_an_answerable_question_is_wrong() -> None:
    question = make("No")
    score = score_answer(question, "No information about that")
    assert score.abstained and not score.correct_by_rule


def test_missing_prediction_and_round_trip() -> None:
    score = score_answer(make("Denver"), None)
    assert (score.f1, score.bleu1, score.correct_by_rule) == (0.0, 0.0, False)
    scored = score_answer(make("June 2023"), "June 2023")
    assert AnswerScore.from_dict(scored.to_dict()) == scored


@pytest.mark.parametrize(("prediction", "gold"), [("3 years", "three years"), ("2", "two"), ("Two", "2"),
                                                 ("twenty minutes", "20 minutes")])
def test_the_rule_reads_a_numeral_and_its_number_word_alike(prediction: str, gold: str) -> None:
    score = score_answer(make(gold), prediction)
    assert score.correct_by_rule
    assert score.f1 <= 0.5  # F1 stays upstream's: the tokens differ


@pytest.mark.parametrize(("prediction", "gold"), [("2019", "2020"), ("3 years", "four years"), ("3.5", "three"),
                                                 ("9:30", "nine")])
def test_spelled_numbers_do_not_make_other_numbers_equal(prediction: str, gold: str) -> None:
    assert not score_answer(make(gold), prediction).correct_by_rule


def test_a_multi_hop_answer_reads_numbers_alike_part_by_part() -> None:
    assert score_answer(make("two, Denver", "multi-hop"), "2, Denver").correct_by_rule
    assert not score_answer(make("two, Denver", "multi-hop"), "3, Denver").correct_by_rule


# the "every gold word" test reads content words: stop words in the gold need not be in the answer ------------
@pytest.mark.parametrize(("prediction", "gold", "category"), [
    # F1 0.5 (8 tokens against 4, 3 shared: one of the gold's two "in"s is missing); every content word is there
    ("The wedding was held in Udaipur during December 2024", "In Udaipur in December", "single-hop"),
    # "at" is not in the answer; F1 0.4
    ("Odalys spent the morning hiking on Mount Rainier", "At Mount Rainier", "single-hop"),
    # per part: "in Paris" and "in Rome" each lose only their "in" (F1 0.2 each)
    ("They visited Paris last spring and then Rome during the summer", "in Paris, in Rome", "multi-hop"),
])
def test_an_answer_that_holds_every_content_word_of_the_gold_is_right(prediction: str, gold: str,
                                                                     category: str) -> None:
    score = score_answer(make(gold, category), prediction)
    assert score.f1 <= 0.5 and score.recall < 1.0  # upstream's F1 and recall, unchanged: the stop words count
    assert score.correct_by_rule


def test_the_issue_pair_is_right() -> None:
    score = score_answer(make("In Udaipur in December"), "Udaipur, December 2024")
    assert score.correct_by_rule and score.recall == 0.5  # "in" twice in the gold, absent from the answer


@pytest.mark.parametrize(("prediction", "gold"), [
    ("Odalys went to Mount Rainier", "She was at Mount Rainier"),  # a pronoun is a content word
    ("in the office", "not in the office"),  # so is a negation (F1 0.8 keeps this one right by F1, though)
    ("to London", "to Paris"),
    ("before the party started", "after the party"),  # "after" says when
])
def test_content_words_still_decide(prediction: str, gold: str) -> None:
    from memtrace_opt.metrics import content_recall

    assert content_recall(prediction, gold) < 1.0


def test_a_gold_of_stop_words_only_is_read_whole() -> None:
    from memtrace_opt.metrics import content_tokens

    assert content_tokens("It was") == ["it", "wa"]  # nothing else left: every token counts
    assert not score_answer(make("It was"), "It is").correct_by_rule


def test_the_former_rule_stays_to_compare_recorded_verdicts() -> None:
    question = make("In Udaipur in December")
    verbose = "The wedding was held in Udaipur during December 2024"
    assert score_answer(question, verbose).correct_by_rule
    assert not score_answer(question, verbose, gold_words="all").correct_by_rule
    with pytest.raises(ValueError, match="gold_words"):
        score_answer(question, verbose, gold_words="some")
