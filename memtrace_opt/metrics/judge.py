"""An LLM judge of answer correctness, lenient in the way the LoCoMo "J" metric of Mem0's paper is.

`LLMJudge` is a dspy.Module with one predictor (`grade`, Signature `JudgeAnswer`), so its prompt can
be inspected and optimized like any other. It runs under the LM passed to `judge(..., lm=...)`
(or the one given at construction, or the configured default). A reply that cannot be parsed gives
`JudgeResult(correct=None, error=...)` and counts in `failures`; it never raises for one bad reply.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from memtrace_opt.data import Question  # noqa: E402
from memtrace_opt.errors import MemtraceError  # noqa: E402

logger = logging.getLogger(__name__)

_COUNTER_LOCK = threading.Lock()
_CORRECT = re.compile(r"^\W*(correct|right|true|yes)\b")
_WRONG = re.compile(r"^\W*(wrong|incorrect|not correct|false|no)\b")


class JudgeAnswer(dspy.Signature):
    """Decide whether a memory assistant's response answers the question the way the gold answer does.

    Be generous. The response is CORRECT when it points to the same fact, entity, number or time as
    the gold answer, even if it is longer, worded differently, or adds detail. Dates count as the same
    when they name the same day, month or year in any format, including relative phrasings that
    resolve to it. The response is WRONG when it contradicts the gold answer, names something else,
    or does not address the question. If the gold answer says the information is not available, the
    response is CORRECT only when it also says it cannot answer or that the information was not
    mentioned."""

    question: str = dspy.InputField(desc="the question that was asked")
    gold_answer: str = dspy.InputField(desc="the reference answer")
    prediction: str = dspy.InputField(desc="the response to grade")
    reason: str = dspy.OutputField(desc="one short sentence explaining the verdict")
    verdict: str = dspy.OutputField(desc="exactly one word: CORRECT or WRONG")


@dataclass(frozen=True)
class JudgeResult:
    """One verdict. `correct` is None when the judge's reply could not be parsed (see `error`)."""

    correct: bool | None
    reason: str
    error: str | None = None

    @property
    def score(self) -> float | None:
        return None if self.correct is None else float(self.correct)

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "reason": self.reason, "error": self.error}


def parse_verdict(text: str) -> bool | None:
    """CORRECT/WRONG (and plain synonyms, any case, with punctuation) -> True/False; else None."""
    cleaned = str(text).strip().lower()
    if _WRONG.match(cleaned):
        return False
    if _CORRECT.match(cleaned):
        return True
    return None


class LLMJudge(dspy.Module):
    """Grades (question, gold answer, prediction) triples; counts calls and unparseable replies."""

    def __init__(self, lm: dspy.LM | None = None) -> None:
        super().__init__()
        self.grade = dspy.Predict(JudgeAnswer)
        self.default_lm = lm
        self.calls = 0
        self.failures = 0

    def forward(self, question: str, gold_answer: str, prediction: str) -> dspy.Prediction:
        return self.grade(question=question, gold_answer=gold_answer, prediction=prediction)

    def judge(
        self, question: str, gold_answer: str, prediction: str, lm: dspy.LM | None = None
    ) -> JudgeResult:
        """Grade one answer under `lm` (default: the constructor's LM, then dspy's configured LM)."""
        chosen = lm or self.default_lm
        try:
            if chosen is not None:
                with dspy.context(lm=chosen):
                    reply = self(question=question, gold_answer=gold_answer, prediction=prediction or "")
            else:
                reply = self(question=question, gold_answer=gold_answer, prediction=prediction or "")
        except MemtraceError:
            raise
        except Exception as exc:  # an unparseable or failed reply is one failed verdict, not a crash
            return self._failed(f"{type(exc).__name__}: {_first_line(exc)}")
        verdict = parse_verdict(getattr(reply, "verdict", ""))
        reason = str(getattr(reply, "reason", "") or "").strip()
        if verdict is None:
            return self._failed(f"unrecognized verdict {str(getattr(reply, 'verdict', ''))[:80]!r}", reason)
        self._count(failed=False)
        return JudgeResult(correct=verdict, reason=reason)

    def judge_question(self, question: Question, prediction: str, lm: dspy.LM | None = None) -> JudgeResult:
        """Grade a prediction for a dataset Question (its gold answer, abstention gold included)."""
        return self.judge(question.question, question.answer, prediction, lm=lm)

    def _failed(self, error: str, reason: str = "") -> JudgeResult:
        logger.warning("judge reply not usable: %s", error)
        self._count(failed=True)
        return JudgeResult(correct=None, reason=reason, error=error)

    def _count(self, failed: bool) -> None:
        with _COUNTER_LOCK:
            self.calls += 1
            self.failures += int(failed)


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else ""
