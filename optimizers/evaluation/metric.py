"""The metric every optimizer maximizes: is the answer to one question correct.

`AnswerMetric` wraps `metrics.score_case`: the token rule (`metrics.TOKEN_RULE`; abstention questions by the
abstention rule) by default, or the LLM judge with `judge=True` (its calls are the judge role's). Its `name` is
what a comparison's setting and an optimizer's manifest record as their metric: the token rule's version, or
"judge".
`dspy_metric` adapts it to DSPy's `metric(example, prediction, trace=None, ...)` shape (GEPA's five-argument
form included: the score plus textual feedback naming the gold answer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.data import Question
from memtrace_opt.metrics import TOKEN_RULE, score_case

__all__ = ["CaseScore", "AnswerMetric", "dspy_metric"]


@dataclass(frozen=True)
class CaseScore:
    """The verdict on one answer: `correct`, the numeric `score` (1.0 / 0.0) and the lexical `scores`."""

    correct: bool
    scores: dict[str, float | None] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return 1.0 if self.correct else 0.0


@dataclass
class AnswerMetric:
    """Scores answers with the token rule, or with the LLM judge under `judge_lm` when `judge` is True."""

    judge: bool = False
    judge_lm: Any = None
    _judge: Any = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return "judge" if self.judge else TOKEN_RULE

    def __call__(self, question: Question, prediction: str) -> CaseScore:
        judge = None
        if self.judge:
            if self._judge is None:
                from memtrace_opt.metrics import LLMJudge

                self._judge = LLMJudge()
            judge = self._judge
        scores, correct = score_case(question, prediction, judge=judge, judge_lm=self.judge_lm)
        return CaseScore(correct=correct, scores=scores)


def _feedback(question: Question, prediction: str, result: CaseScore) -> str:
    if result.correct:
        return f"Correct: the answer {prediction!r} matches the gold answer {question.answer!r}."
    return (
        f"Wrong: the question was {question.question!r}; the answer was {prediction!r} but the gold answer is "
        f"{question.answer!r}."
    )


def dspy_metric(metric: AnswerMetric, *, feedback: bool = False) -> Callable[..., Any]:
    """DSPy's metric shape over `metric`: (example, prediction, trace=None, pred_name=None, pred_trace=None).

    Returns the score as a float, or with `feedback=True` a `dspy.Prediction(score, feedback)` (GEPA)."""
    from memtrace_opt.optimizers.evaluation.examples import resolve_conversation, resolve_question

    def score(example: Any, prediction: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None) -> Any:
        _, conversation = resolve_conversation(example["conversation"])
        question = resolve_question(example["question"], conversation)
        answer = str(getattr(prediction, "answer", "") or "") if prediction is not None else ""
        result = metric(question, answer)
        if feedback:
            return dspy.Prediction(score=result.score, feedback=_feedback(question, answer, result))
        return result.score

    return score
