"""The script that lists which recorded verdicts the content-word test flips."""

from __future__ import annotations

import json

from memtrace_opt.benchmarks.rule_flips import flips_in, main


def _row(qid: str, gold: str, prediction: str, dataset: str = "locomo", category: str = "single-hop") -> str:
    return json.dumps({"question_id": qid, "question": "?", "gold": gold, "prediction": prediction,
                       "category": category, "dataset": dataset, "evidence": [], "abstention": False})


def test_flips_are_listed_for_locomo_questions_only(tmp_path) -> None:
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "cases.jsonl").write_text("\n".join([
        _row("q1", "In Udaipur in December", "The wedding was held in Udaipur during December 2024"),  # flips
        _row("q2", "Paris", "Paris"),  # right either way
        _row("q3", "Rome", "Paris"),  # wrong either way
        _row("q4", "In Udaipur in December", "The wedding was held in Udaipur during December 2024", "longmemeval"),
    ]) + "\n")
    scored, found = flips_in(run / "cases.jsonl")
    assert scored == 3 and [(f.question_id, f.after, f.f1) for f in found] == [("q1", True, 0.5)]
    assert len(flips_in(run / "cases.jsonl", all_datasets=True)[1]) == 2

    out = tmp_path / "flips.md"
    assert main([str(tmp_path / "runs" / "*"), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("1 of 3 verdicts flip") and "| q1 | single-hop | In Udaipur in December |" in text
    assert main([str(tmp_path / "nothing")]) == 2


def test_the_flips_since_the_first_rule_go_both_ways(tmp_path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([
        _row("q1", "14 October 2031", "2031-10-14"),  # the date in another form: now right
        _row("q2", "2 kayaks", "2"),  # a bare number: F1 accepted it, now reported apart
        _row("q3", "14 October 2031", "15 October 2031"),  # another day: F1 accepted it
        _row("q4", "14 October 2031", "14 October 2031"),  # right either way
    ]) + "\n")
    assert flips_in(cases)[1] == []  # none of them is a content-word flip
    scored, found = flips_in(cases, since="token-rule-v1")
    assert scored == 4 and [(f.question_id, f.after) for f in found] == [("q1", True), ("q2", False), ("q3", False)]
    out = tmp_path / "flips.md"
    assert main([str(tmp_path), "--since", "token-rule-v1", "--out", str(out)]) == 0
    assert out.read_text().startswith("3 of 4 verdicts flip under token-rule-v3 (since token-rule-v1)")


def test_the_flips_since_the_second_rule_are_dates_in_another_form_than_the_golds(tmp_path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join([
        _row("q1", "from 18 October to 20 October 2031", "2031-10-20"),  # one end, in ISO form: now right
        _row("q2", "from 18 October to 20 October 2031", "20 October 2031"),  # right either way
        _row("q3", "from 18 October to 20 October 2031", "2031-10-25"),  # another day: wrong either way
    ]) + "\n")
    scored, found = flips_in(cases, since="token-rule-v2")
    assert scored == 3 and [(f.question_id, f.after) for f in found] == [("q1", True)]
