"""The token rule's date forms (`token-rule-v2`): a date named in another written form is the same date, exactly;
a bare number for a number with a unit is reported apart; `token-rule-v3`: no verdict depends on the form an answer
writes a gold's date in. Every date here is invented."""

from __future__ import annotations

import pytest

from memtrace_opt.data import Question
from memtrace_opt.metrics import RULES, TOKEN_RULE, AnswerScore, score_answer
from memtrace_opt.metrics.dates import DateParts, find_dates, in_gold_form, names_dates, without_dates

OCT_14 = DateParts(2031, 10, 14)


def make(gold: str, category: str = "temporal") -> Question:
    return Question("x:q0", "When?", gold, category, None, ("D1:1",))


def read(text: str, years: bool = False) -> list[tuple[DateParts, ...]]:
    return [span.readings for span in find_dates(text, years=years)]


@pytest.mark.parametrize("text", ["14 October 2031", "14th of Oct. 2031", "October 14, 2031", "Oct 14th 2031",
                                  "14October, 2031", "2031-10-14", "2031/10/14", "14/10/2031", "10/14/2031",
                                  "14.10.2031", "Tuesday, 14 October 2031", "Tuesday 2031-10-14",
                                  "on 2031-10-14T09:30, after lunch"])
def test_every_written_form_of_one_day_reads_the_same(text: str) -> None:
    assert read(text) == [(OCT_14,)]


def test_a_date_names_only_the_parts_it_writes() -> None:
    assert read("October 2031") == read("Oct., 2031") == [(DateParts(2031, 10, None),)]
    assert read("14 October") == read("October 14") == [(DateParts(None, 10, 14),)]
    assert read("05/07/2031") == [(DateParts(2031, 7, 5), DateParts(2031, 5, 7))]  # both orders can be meant


@pytest.mark.parametrize("text", ["May", "you may 3 times", "2031-13-40", "31 April", "9:30", "3 weeks", "1,2031"])
def test_what_is_no_date(text: str) -> None:
    assert read(text) == []


def test_a_year_alone_is_read_only_where_asked_and_only_without_a_fuller_date() -> None:
    assert read("in 2031") == [] and read("in 2031", years=True) == [(DateParts(2031),)]
    assert read("14 October 2031", years=True) == [(OCT_14,)]


def test_names_dates_is_exact_about_the_parts_the_gold_names() -> None:
    gold = find_dates("October 2031")
    assert names_dates(find_dates("Oct. 2031"), gold)
    assert not names_dates(find_dates("2031-10-01"), gold)  # a day the gold never gave
    assert not names_dates(find_dates("November 2031"), gold)
    assert not names_dates(find_dates("2031-10-14"), find_dates("14 October"))  # a year the gold never gave
    assert not names_dates(find_dates("2031-10-14 or 2031-10-21"), find_dates("14 October 2031"))  # a hedge


def test_without_dates_keeps_the_rest_of_the_text() -> None:
    text = "The weekend after 14 October 2031, at the quay"
    assert without_dates(text, find_dates(text)) == "The weekend after , at the quay"


@pytest.mark.parametrize("prediction", ["2031-10-14", "Tuesday, 14/10/2031", "10/14/2031", "14.10.2031",
                                        "It was on 2031-10-14."])
def test_the_gold_date_in_another_form_is_right(prediction: str) -> None:
    score = score_answer(make("14 October 2031"), prediction)
    assert score.correct_by_rule and score.scored_by == TOKEN_RULE
    assert not score_answer(make("14 October 2031"), prediction, rule="token-rule-v1").correct_by_rule


@pytest.mark.parametrize(("gold", "prediction"), [
    ("14 October 2031", "2031-10-15"),  # another day
    ("14 October 2031", "15 October 2031"),  # another day, though F1 is 0.67
    ("14 October 2031", "2032-10-14"),  # another year
    ("October 2031", "2031-10-01"),  # a day the gold never gave
    ("14 October 2031", "Not mentioned, maybe 2031-10-14"),  # a decline
])
def test_a_date_that_is_not_the_gold_date_is_wrong(gold: str, prediction: str) -> None:
    assert not score_answer(make(gold), prediction).correct_by_rule


def test_the_gold_words_around_a_date_must_come_with_it() -> None:
    gold = make("The weekend after 14 October 2031")
    assert score_answer(gold, "the weekend after 2031-10-14").correct_by_rule
    assert not score_answer(gold, "the weekend after 2031-10-14", rule="token-rule-v1").correct_by_rule
    assert not score_answer(gold, "2031-10-14", rule="token-rule-v2").correct_by_rule  # v2: without them, wrong
    # v3: the date alone gets the verdict its written form gets, which F1 (0.75) gives: right
    assert score_answer(gold, "14 October 2031").correct_by_rule == score_answer(gold, "2031-10-14").correct_by_rule


def test_another_date_is_wrong_even_where_f1_is_high() -> None:
    score = score_answer(make("14 October 2031"), "15 October 2031")
    assert score.f1 > 0.5 and not score.correct_by_rule
    assert score_answer(make("14 October 2031"), "15 October 2031", rule="token-rule-v1").correct_by_rule
    assert score_answer(make("14 October 2031"), "14 October").correct_by_rule  # fewer parts, none other: F1


def test_a_multi_hop_gold_of_two_dates_needs_both() -> None:
    gold = make("14 October 2031, 3 November 2031", "multi-hop")
    assert score_answer(gold, "2031-10-14, 2031-11-03").correct_by_rule
    assert not score_answer(gold, "2031-10-14, 2031-11-04").correct_by_rule


@pytest.mark.parametrize(("gold", "prediction"), [("5 weeks ago", "5"), ("5 weeks ago", "five"),
                                                   ("2 kayaks", "2."), ("four months", "4")])
def test_a_bare_number_for_a_number_with_a_unit_is_reported_apart(gold: str, prediction: str) -> None:
    score = score_answer(make(gold, "single-hop"), prediction)
    assert score.bare_number and not score.correct_by_rule


@pytest.mark.parametrize(("gold", "prediction"), [("5 weeks ago", "5 weeks"), ("5", "5"), ("five", "5"),
                                                   ("in 2031", "2031"), ("5 weeks ago", "3"), ("14 October 2031", "14")])
def test_what_is_no_bare_number(gold: str, prediction: str) -> None:
    assert not score_answer(make(gold, "single-hop"), prediction).bare_number


def test_the_first_rule_neither_reports_nor_refuses_a_bare_number() -> None:
    score = score_answer(make("2 kayaks", "single-hop"), "2", rule="token-rule-v1")
    assert score.correct_by_rule and not score.bare_number and score.scored_by == "token-rule-v1"


def test_the_rule_is_named_and_a_score_says_which_scored_it() -> None:
    assert TOKEN_RULE == RULES[-1] == "token-rule-v3"
    score = score_answer(make("5 weeks ago", "single-hop"), "5")
    assert AnswerScore.from_dict(score.to_dict()) == score
    old = {k: v for k, v in score.to_dict().items() if k not in ("bare_number", "scored_by")}
    assert AnswerScore.from_dict(old).scored_by == "token-rule-v1"  # written before the rule had versions
    with pytest.raises(ValueError, match="rule must be one of"):
        score_answer(make("3"), "3", rule="token-rule-v9")


RANGE = "from 18 October to 20 October 2031"


def test_a_gold_date_is_read_in_the_golds_form_and_no_other_date_is() -> None:
    assert in_gold_form("It ended 2031-10-20.", RANGE) == "It ended 20 October 2031."
    assert in_gold_form("2031-10-20 or 2031-11-02", RANGE) == "20 October 2031 or 2031-11-02"  # not the gold's
    assert in_gold_form("2031-10-18", RANGE) == "2031-10-18"  # the gold's 18 October names no year: not the same parts
    assert in_gold_form("no date here", RANGE) == "no date here"


@pytest.mark.parametrize(("gold", "written", "other_forms"), [
    (RANGE, "20 October 2031", ["2031-10-20", "20/10/2031", "Monday, 2031-10-20"]),
    ("the week before 14 October 2031", "the week before 14 October 2031", ["the week before 2031-10-14"]),
    ("14 October 2031, 3 March 2032", "14 October 2031, 3 March 2032", ["2031-10-14, 2032-03-03"]),
    ("in October 2031", "October 2031", ["Oct. 2031"]),
])
def test_no_verdict_depends_on_the_form_a_golds_date_is_written_in(gold: str, written: str,
                                                                   other_forms: list[str]) -> None:
    for category in ("temporal", "multi-hop", "single-hop"):
        question = make(gold, category)
        verdict = score_answer(question, written).correct_by_rule
        assert [score_answer(question, form).correct_by_rule for form in other_forms] == [verdict] * len(other_forms)


def test_the_end_of_a_range_in_iso_form_was_wrong_by_v2_and_is_scored_as_written_by_v3() -> None:
    question = make(RANGE)
    assert score_answer(question, "20 October 2031", rule="token-rule-v2").correct_by_rule
    assert not score_answer(question, "2031-10-20", rule="token-rule-v2").correct_by_rule
    iso = score_answer(question, "2031-10-20")
    assert iso.correct_by_rule and iso.f1 == 0.0  # F1 stays upstream's
    assert not score_answer(question, "2031-10-21").correct_by_rule  # another day is never right
