"""The answer format learned from a split's gold answers (`gold_format.py`): date forms, lengths, lists."""

from __future__ import annotations

import pytest

from memtrace_opt.optimizers.evaluation.gold_format import (
    GoldFormat,
    date_kind,
    date_template,
    describe_form,
    form_key,
    list_parts,
    render_date,
)


@pytest.mark.parametrize(("text", "template"), [
    ("3 March 2030", "{day} {month} {year}"),
    ("The Sunday before 16 March 2031", "{day} {month} {year}"),
    ("March 3, 2030", "{month} {day}, {year}"),
    ("3rd of March, 2030", "{day}{ord} of {month}, {year}"),
    ("Sept. 9, 2030", "{mon}. {day}, {year}"),
    ("June 2030", "{month} {year}"),
    ("2030-03-03", "{year}-{m}-{d}"),
    ("21/03/2030", "{d}/{m}/{year}"),
    ("03/21/2030", "{m}/{d}/{year}"),
    ("03/04/2030", "{a}/{b}/{year}"),  # reads both ways: the split's other golds settle it
    ("in 2029", "{year}"),
    ("you may 3 times", None),  # "may" the verb
    ("a green canoe", None),
])
def test_a_dates_form_is_a_template_of_its_parts(text, template):
    assert date_template(text) == template


def test_a_form_renders_the_invented_date_and_says_its_parts():
    assert render_date("{day} {month} {year}") == "14 October 2031"
    assert render_date("{month} {day}, {year}") == "October 14, 2031"
    assert render_date("{year}/{m}/{d}") == "2031/10/14"
    assert render_date("{day}{ord} of {month}") == "14th of October"
    assert describe_form("{day} {month} {year}") == "day, month name and year"
    assert describe_form("{year}-{m}-{d}") == "year, month and day in digits"
    assert describe_form("{year}") == "year"
    assert form_key("{d}/{m}/{year}") == form_key("{m}/{d}/{year}") != form_key("{year}-{m}-{d}")
    assert [date_kind(t) for t in ("3 March 2030", "2030-03-03", "2029", "a canoe")] == [
        "named", "numeric", "year", None]


def test_the_format_is_learned_from_the_golds_that_answer():
    form = GoldFormat.learn(["March 3, 2030", "April 18, 2029", "June 2030", "3 May 2028", "a green canoe", "Ilse",
                             "fencing, archery, chess", "2029", "None", "Not mentioned", "", None])
    assert form.golds == 8  # declines and empty golds left out
    assert (form.date_form, form.month_form) == ("{month} {day}, {year}", "{month} {year}")  # the most used, with a day
    assert form.example_date() == "October 14, 2031"
    assert form.date_keys() == {"{month} {day}, {year}", "{month} {year}", "{year}"}
    assert form.list_separator == ","
    assert form.phrase_words == 3  # the upper quartile of 3, 3, 2, 3, 3, 1, 3, 1 words
    assert GoldFormat.from_dict(form.to_dict()) == form


def test_a_year_last_date_in_digits_is_read_day_first_when_a_gold_shows_it():
    assert GoldFormat.learn(["03/04/2030", "05/06/2029", "21/03/2030"]).date_form == "{d}/{m}/{year}"
    assert GoldFormat.learn(["03/04/2030", "05/06/2029"]).date_form == "{m}/{d}/{year}"


def test_golds_without_dates_or_lists_learn_none():
    form = GoldFormat.learn(["a green canoe", "Ilse", "the harbour market"])
    assert (form.date_form, form.month_form, form.list_separator) == (None, None, None)
    assert form.example_date() == "" and form.date_keys() == {"{year}"}
    assert GoldFormat.learn([]) == GoldFormat()
    assert GoldFormat.learn(["running and painting"]).list_separator == "and"
    assert GoldFormat.learn(["2029", "2030"]).date_form == "{year}"


def test_list_parts_split_items_but_not_a_date():
    assert list_parts("fencing, archery and chess") == ["fencing", "archery", "chess"]
    assert list_parts("19 January, 2031") == ["19 January, 2031"]
