"""GoldError: a failed case whose gold answer, not the memory system, is at fault.

Two tests, shared by lineage and graphtrace, both decided by the judge role (`AnswerJudge`) where one is set:

1. The gold evidence turns do not hold the gold answer; made only when asked (`judge_evidence`). Where the turns are
   in the graph and no lexical test finds the answer in them (`NeededInfo.holds`, nor as a fact written with a
   pronoun or a relative date), the judge reads the turns as an answer to the question: if they do not say what the
   gold answer says, the key (or its evidence ids) is wrong. A lexical test alone cannot tell a wrong key from an
   answer the turns imply (a city for its country, "last year" for a year, a count of mentions), so it only decides
   when the judge is asked; and a small judge reads such implied answers as not said (the embedded 1.5B model fired
   it on 29 of the 62 held-out cases, right once), so it is off unless asked.
2. Answered in other words. The needed information reached the answer op along a path where every op carried it
   (`Flow.reached_answer`), and the judge holds that the prediction says what the gold answer says: the metric
   called a right answer wrong.

Without a judge neither is decided: the method's own verdict stands. Neither applies to a question whose right
answer is to decline (an abstention): its gold answer holds nothing to find.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memtrace_opt.attribution._ask import evidence_text
from memtrace_opt.attribution._evidence import NeededInfo, speakers
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._types import GOLD, FailedCase, Verdict
from memtrace_opt.attribution.protocol import make_verdict

__all__ = ["AnswerJudge", "LMAnswerJudge", "gold_verdict"]


@runtime_checkable
class AnswerJudge(Protocol):
    """Judges whether a text, read as the answer to a question, says what the gold answer says.

    `means(question, gold, text)` returns True or False, or None when it has no usable judgement (a failed call,
    an unparseable reply); it never raises for one case and keeps no state that changes later judgements."""

    def means(self, question: str, gold: str, text: str) -> bool | None: ...


@dataclass(frozen=True)
class LMAnswerJudge:
    """An `AnswerJudge` on an LM (the judge role): the answer metric's judge (`metrics.judge.LLMJudge`)."""

    lm: Any

    def means(self, question: str, gold: str, text: str) -> bool | None:
        from memtrace_opt.metrics.judge import LLMJudge

        return LLMJudge(self.lm).judge(question, gold, text).correct


def gold_verdict(case: FailedCase, view: GraphView, flow: Flow, judge: AnswerJudge | None, method: str, *,
                 judge_evidence: bool = False) -> Verdict | None:
    """The GoldError verdict of `case` by the module's tests, or None (no judge, or none holds); the first test only
    with `judge_evidence`."""
    if judge is None or case.abstention or flow.needed.abstention:
        return None
    confidence = 0.6 if flow.evidence.source == "gold" else 0.4
    if judge_evidence and _evidence_lacks_gold(case, view, flow, judge):
        return make_verdict(case, method, view, None, GOLD, "the gold evidence turns do not hold the gold answer "
                            f"{case.gold!r}: the judge reads them as not saying it", confidence)
    prediction = str(case.prediction or "").strip()
    if flow.reached_answer and prediction and judge.means(case.question_text, case.gold, prediction) is True:
        reason = (f"answered in other words: the answer op was shown the needed information and answered {prediction!r}, "
                  f"which the judge takes to mean the gold answer {case.gold!r}")
        return make_verdict(case, method, view, None, GOLD, reason, confidence)
    return None


def _evidence_lacks_gold(case: FailedCase, view: GraphView, flow: Flow, judge: AnswerJudge) -> bool:
    """Test 1: gold evidence turns in the graph that hold the gold answer by no lexical test, and that the judge reads
    as not saying it."""
    if flow.evidence.source != "gold" or not flow.evidence.turns:
        return False
    answer = NeededInfo(case.question_text, case.gold, (), False, speakers(view))
    if not answer.answer_tokens:
        return False
    lines = [view.turn_line(t) for t in flow.evidence.turns]
    if answer.holds(lines) or answer.written(lines):
        return False
    return judge.means(case.question_text, case.gold, evidence_text(view, flow.evidence)) is False
