"""Answer metrics: LoCoMo token F1 and BLEU-1, category-aware scoring, the LLM judge, result tables.

The judge (`LLMJudge`, `JudgeAnswer`, `JudgeResult`, `parse_verdict`) imports dspy, so it is loaded
on first use rather than with this package.
"""

from __future__ import annotations

from typing import Any

from memtrace_opt.metrics._porter import porter_stem
from memtrace_opt.metrics.score import CORRECT_F1, AnswerScore, is_abstention, score_answer
from memtrace_opt.metrics.table import CategoryStats, CategoryTable, ScoreRow, category_table
from memtrace_opt.metrics.text import (
    STOP_WORDS,
    TokenScores,
    answer_tokens,
    bleu1,
    content_recall,
    content_tokens,
    multi_answer_f1,
    normalize_answer,
    token_f1,
    token_scores,
)

_JUDGE_NAMES = ("JudgeAnswer", "JudgeResult", "LLMJudge", "parse_verdict")

__all__ = [
    "CORRECT_F1",
    "AnswerScore",
    "CategoryStats",
    "CategoryTable",
    "STOP_WORDS",
    "JudgeAnswer",
    "JudgeResult",
    "LLMJudge",
    "ScoreRow",
    "TokenScores",
    "answer_tokens",
    "bleu1",
    "category_table",
    "content_recall",
    "content_tokens",
    "is_abstention",
    "multi_answer_f1",
    "normalize_answer",
    "parse_verdict",
    "porter_stem",
    "score_answer",
    "token_f1",
    "token_scores",
]


def __getattr__(name: str) -> Any:
    if name in _JUDGE_NAMES:
        from memtrace_opt.metrics import judge

        return getattr(judge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
