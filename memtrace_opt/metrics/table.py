"""Per-category result tables: count, mean F1, mean BLEU-1, judge accuracy and rule accuracy.

Rows come in as `ScoreRow`s or plain tuples `(category, f1, judge, correct[, bleu1[, bare_number]])` where
`judge` is True/False/1.0/0.0 or None (not judged or the judge failed), `correct` is the rule verdict and
`bare_number` marks an answer the rule reports apart (`metrics.score`). Percentages are rendered on a 0-100
scale, as peers report LoCoMo numbers. A rendered table says which version of the token rule scored it
(`CategoryTable.rule`, default `metrics.score.TOKEN_RULE`) and how many bare numbers it set apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from rich.table import Table

from memtrace_opt.data import category_sort_key
from memtrace_opt.metrics.score import TOKEN_RULE

OVERALL = "overall"
HEADERS = ("category", "n", "F1", "BLEU-1", "J", "judged", "rule acc")


class ScoreRow(NamedTuple):
    category: str
    f1: float
    judge: bool | float | None
    correct: bool
    bleu1: float | None = None
    bare_number: bool = False


@dataclass(frozen=True)
class CategoryStats:
    """Aggregates for one category (or `overall`). Means are None when nothing contributed."""

    category: str
    count: int
    mean_f1: float
    mean_bleu1: float | None
    judge_accuracy: float | None
    judged: int
    rule_accuracy: float
    bare_numbers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CategoryTable:
    """One CategoryStats per category in display order, plus the overall row; `rule` the token rule's version
    that gave the rows' verdicts."""

    rows: tuple[CategoryStats, ...]
    overall: CategoryStats
    rule: str = TOKEN_RULE

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "overall": self.overall.to_dict(), "rule": self.rule}

    def note(self) -> str:
        """What scored the "rule acc" column, and the bare numbers it set apart."""
        bare = self.overall.bare_numbers
        return f"rule acc: {self.rule}" + (f"; {bare} bare number{'s' if bare != 1 else ''} for a number with a "
                                           "unit, reported apart (not right)" if bare else "")

    def _cells(self) -> list[list[str]]:
        return [_cells(row) for row in (*self.rows, self.overall)]

    def to_rich(self, title: str | None = None) -> Table:
        table = Table(title=title, caption=self.note())
        for header in HEADERS:
            table.add_column(header, justify="left" if header == "category" else "right")
        cells = self._cells()
        for i, row in enumerate(cells):
            table.add_row(*row, end_section=i == len(cells) - 2)
        return table

    def to_markdown(self) -> str:
        lines = [
            "| " + " | ".join(HEADERS) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 1)) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self._cells()]
        return "\n".join(lines) + "\n\n" + self.note() + "\n"


def category_table(rows: Iterable[ScoreRow | Sequence[Any]], rule: str = TOKEN_RULE) -> CategoryTable:
    """Aggregate scored questions by category (see module docstring for the row shape), scored by `rule`."""
    parsed = [ScoreRow(*row) for row in rows]
    groups: dict[str, list[ScoreRow]] = {}
    for row in parsed:
        groups.setdefault(str(row.category), []).append(row)
    stats = tuple(_aggregate(name, groups[name]) for name in sorted(groups, key=category_sort_key))
    return CategoryTable(rows=stats, overall=_aggregate(OVERALL, parsed), rule=rule)


def _aggregate(name: str, rows: list[ScoreRow]) -> CategoryStats:
    count = len(rows)
    bleu = [float(r.bleu1) for r in rows if r.bleu1 is not None]
    judged = [float(r.judge) for r in rows if r.judge is not None]
    return CategoryStats(
        category=name,
        count=count,
        mean_f1=sum(float(r.f1) for r in rows) / count if count else 0.0,
        mean_bleu1=sum(bleu) / len(bleu) if bleu else None,
        judge_accuracy=sum(judged) / len(judged) if judged else None,
        judged=len(judged),
        rule_accuracy=sum(bool(r.correct) for r in rows) / count if count else 0.0,
        bare_numbers=sum(bool(r.bare_number) for r in rows),
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _cells(row: CategoryStats) -> list[str]:
    return [
        row.category,
        str(row.count),
        _percent(row.mean_f1),
        _percent(row.mean_bleu1),
        _percent(row.judge_accuracy),
        str(row.judged),
        _percent(row.rule_accuracy),
    ]
