"""Per-category aggregation and rendering."""

from __future__ import annotations

import pytest
from rich.console import Console

from memtrace_opt.metrics import ScoreRow, category_table

ROWS = [
    ("temporal", 1.0, True, True, 1.0),
    ScoreRow("temporal", 0.0, False, False, 0.0),
    ("single-hop", 0.5, None, True, 0.25),
    ("adversarial", 1.0, 1.0, True),  # no BLEU-1 given
]


def test_aggregates_by_category_and_overall() -> None:
    table = category_table(ROWS)
    assert [r.category for r in table.rows] == ["single-hop", "temporal", "adversarial"]
    temporal = table.rows[1]
    assert (temporal.count, temporal.mean_f1, temporal.mean_bleu1) == (2, 0.5, 0.5)
    assert (temporal.judge_accuracy, temporal.judged, temporal.rule_accuracy) == (0.5, 2, 0.5)
    single = table.rows[0]
    assert (single.judge_accuracy, single.judged, single.rule_accuracy) == (None, 0, 1.0)
    assert table.rows[2].mean_bleu1 is None
    overall = table.overall
    assert overall.count == 4
    assert overall.mean_f1 == pytest.approx((1 + 0 + 0.5 + 1) / 4)  # 0.625
    assert overall.mean_bleu1 == pytest.approx((1 + 0 + 0.25) / 3)  # 0.4167
    assert overall.judge_accuracy == pytest.approx(2 / 3) and overall.judged == 3
    assert overall.rule_accuracy == 0.75


def test_markdown() -> None:
    assert category_table(ROWS).to_markdown() == (
        "| category | n | F1 | BLEU-1 | J | judged | rule acc |\n"
        "|---|---:|---:|---:|---:|---:|---:|\n"
        "| single-hop | 1 | 50.0 | 25.0 | - | 0 | 100.0 |\n"
        "| temporal | 2 | 50.0 | 50.0 | 50.0 | 2 | 50.0 |\n"
        "| adversarial | 1 | 100.0 | - | 100.0 | 1 | 100.0 |\n"
        "| overall | 4 | 62.5 | 41.7 | 66.7 | 3 | 75.0 |\n"
        "\n"
        "rule acc: token-rule-v3\n"
    )


def test_a_table_says_which_rule_scored_it_and_counts_the_bare_numbers_apart() -> None:
    table = category_table([*ROWS, ScoreRow("single-hop", 0.5, None, False, 0.5, True)], rule="token-rule-v1")
    assert table.rows[0].bare_numbers == 1 and table.overall.bare_numbers == 1 and table.rows[1].bare_numbers == 0
    assert table.to_dict()["rule"] == "token-rule-v1"
    assert table.to_markdown().endswith(
        "\nrule acc: token-rule-v1; 1 bare number for a number with a unit, reported apart (not right)\n")
    console = Console(record=True, width=140)
    console.print(table.to_rich())
    assert "rule acc: token-rule-v1; 1 bare number" in console.export_text()


def test_rich_table() -> None:
    console = Console(record=True, width=100)
    console.print(category_table(ROWS).to_rich(title="results"))
    text = console.export_text()
    assert "results" in text and "overall" in text and "62.5" in text and "66.7" in text


def test_empty_input() -> None:
    table = category_table([])
    assert table.rows == () and table.overall.count == 0 and table.overall.judge_accuracy is None
    assert table.to_dict()["overall"]["mean_f1"] == 0.0
