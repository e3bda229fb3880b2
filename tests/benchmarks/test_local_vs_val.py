"""The figure that says whether the loop's cheap signal is worth trusting: local gain against validation change."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.benchmarks.local_vs_val import main, pairs_of, ranks, report, spearman


def candidate(fixed: int, lost: int, val: float | None, accepted: bool = False, local: bool = True) -> dict:
    counts = ({"targets": 10, "fixed": fixed, "lost": lost, "calls": 8} if local  # a local check's, as a row writes it
              else {"blamed": 2, "broken": lost, "fixed": fixed, "kept": 0, "lm_calls": 2, "targets": 1})
    return {"instruction": "x", "origin": "reflection", "local": counts, "val_score": val, "accepted": accepted}


TABLE = {"rows": [
    {"optimizer": "memtrace", "details": {"baseline": {"val_accuracy": 0.5}, "rounds": [
        {"round": 1, "accepted": True, "val_accuracy": 0.6,
         "candidates": [candidate(3, 0, 0.6, True), candidate(1, 0, 0.45), candidate(2, 0, None)]},
        {"round": 2, "accepted": False, "val_accuracy": 0.6,
         "candidates": [candidate(0, 1, 0.55), candidate(4, 0, 0.7, local=False)]}]}},
    {"optimizer": "gepa", "details": {}},
]}


def test_each_validated_candidate_is_measured_against_the_program_before_its_round():
    pairs = pairs_of(TABLE, "cmp")
    assert [(p.round, p.local_gain, round(p.val_change, 3)) for p in pairs] == [(1, 3, 0.1), (1, 1, -0.05), (2, -1, -0.05)]
    assert pairs[0].accepted and not pairs[1].accepted  # the unvalidated and the local-check-only ones are left out


def test_rank_correlation_with_ties():
    assert ranks([3, 1, 1]) == [3.0, 1.5, 1.5]
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0) and spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def test_the_script_writes_the_table_and_the_figure(tmp_path, capsys):
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "compare.json").write_text(json.dumps(TABLE))
    assert main([str(tmp_path / "cmp"), "--out", str(tmp_path / "out.md")]) == 0
    text = (tmp_path / "out.md").read_text()
    assert "3 candidates scored locally and validated; Spearman's rho +0.87" in text
    assert "| cmp:memtrace | 1 | reflection | +3 (8) | +10.0 pts | yes |" in text


def test_a_candidate_validated_again_unchanged_is_counted_once():
    same = dict(candidate(2, 0, 0.3), demos=[{"q": "a"}])
    other = dict(candidate(2, 0, 0.3), demos=[{"q": "b"}])
    table = {"rows": [{"optimizer": "memtrace", "details": {"baseline": {"val_accuracy": 0.5}, "rounds": [
        {"round": 1, "chosen_predictor": "p", "candidates": [same]},
        {"round": 2, "chosen_predictor": "p", "candidates": [dict(same), other]},  # the same program: a repeat
        {"round": 3, "chosen_predictor": "q", "candidates": [dict(same)]}]}}]}  # another predictor: not one
    pairs = pairs_of(table, "cmp")
    assert [p.repeat for p in pairs] == [False, True, False, False]
    text = report(pairs)
    assert "3 candidates scored locally and validated" in text
    assert "1 validated again unchanged in a later round, counted once" in text
    assert text.count("| cmp:memtrace |") == 3
