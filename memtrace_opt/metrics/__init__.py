"""Answer metrics: LoCoMo token F1 and BLEU-1, category-aware scoring, the LLM judge, result tables; the one rule
for a reply that declines (`is_decline`), the token rule's version (`TOKEN_RULE`, its date forms in `metrics.dates`)
and the word lists of every "holds the answer" test (`text.words`).

The judge (`LLMJudge`, `JudgeAnswer`, `JudgeResult`, `parse_verdict`) imports dspy, so it is loaded
on first use rather than with this package.
"""

from __future__ import annotations

from typing import Any

from memtrace_opt.metrics.declines import is_decline
from memtrace_opt.metrics.score import (
    CORRECT_F1,
    RULES,
    TOKEN_RULE,
    AnswerScore,
    is_abstention,
    score_answer,
    score_case,
)
from memtrace_opt.metrics.table import CategoryStats, CategoryTable, ScoreRow, category_table
from memtrace_opt.metrics.text import (
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
from memtrace_opt.text.porter import porter_stem
from memtrace_opt.text.words import CHAT_STOP_WORDS, FACT_STOP_WORDS, FUNCTION_WORDS, SCORING_STOP_WORDS

_JUDGE_NAMES = ("JudgeAnswer", "JudgeResult", "LLMJudge", "parse_verdict")

__all__ = [
    "CHAT_STOP_WORDS",
    "CORRECT_F1",
    "FACT_STOP_WORDS",
    "FUNCTION_WORDS",
    "RULES",
    "SCORING_STOP_WORDS",
    "TOKEN_RULE",
    "AnswerScore",
    "CategoryStats",
    "CategoryTable",
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
    "is_decline",
    "multi_answer_f1",
    "normalize_answer",
    "parse_verdict",
    "porter_stem",
    "score_answer",
    "score_case",
    "token_f1",
    "token_scores",
]


def __getattr__(name: str) -> Any:
    if name in _JUDGE_NAMES:
        from memtrace_opt.metrics import judge

        return getattr(judge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
