"""Cached, traced evaluation of a memory program on a set of cases.

    evaluator = CachedEvaluator(metric, memo=ReplayMemo(), task_lm=models.task)
    result = evaluator.evaluate(program, cases)          # traced; replays through the memo
    result.accuracy, result.failed(), result.traces["conv-26@..."].graph()

Each conversation among the cases is traced once per evaluation (`trace_conversation`) with the memo's replay
control active, so only operations whose content changed run: after an answer-prompt rewrite, the write path
is served from the memo and only the answer calls reach the LM. Every traced run feeds the memo back.
With `reuse` (a scoped replay, `scoped.py`), given calls are served outputs by content key before the memo.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import dspy

from memtrace_opt.data import Question
from memtrace_opt.optimizers.core.program_io import program_digest
from memtrace_opt.optimizers.evaluation.examples import CaseRef, group_by_conversation, resolve_conversation
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo, lm_name
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric, CaseScore
from memtrace_opt.tracing import TracedConversation, trace_conversation

__all__ = ["CaseResult", "EvalResult", "CachedEvaluator"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CaseResult:
    """One evaluated question."""

    case_id: str
    conversation_key: str
    question: Question
    prediction: str
    score: CaseScore
    error: str | None = None

    @property
    def correct(self) -> bool:
        return self.score.correct


@dataclass
class EvalResult:
    """The cases of one evaluation (in the order asked) and the traced run of each conversation."""

    cases: list[CaseResult]
    traces: dict[str, TracedConversation] = field(default_factory=dict)
    lm_calls: int = 0
    reused_ops: int = 0
    rerun_ops: int = 0

    @property
    def accuracy(self) -> float:
        return sum(c.correct for c in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def mean_f1(self) -> float:
        """Mean token F1 of the answers: unlike the token rule, a long answer that holds the gold words among many
        others scores low."""
        values = [float(f1) for c in self.cases if (f1 := c.score.scores.get("f1")) is not None]
        return sum(values) / len(values) if values else 0.0

    @property
    def mean_words(self) -> float:
        """Mean length of the answers in words."""
        return sum(len(c.prediction.split()) for c in self.cases) / len(self.cases) if self.cases else 0.0

    def correctness(self) -> dict[str, bool]:
        """Case id -> answered correctly, for comparing two evaluations question by question."""
        return {c.case_id: c.correct for c in self.cases}

    def failed(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.correct]

    def passed(self) -> list[CaseResult]:
        return [c for c in self.cases if c.correct]

    def by_id(self) -> dict[str, CaseResult]:
        return {c.case_id: c for c in self.cases}


class CachedEvaluator:
    """Evaluates programs on cases through one shared replay memo. Thread-safe across conversations.

    `meta` is recorded in each run's `run_start` (system, dataset, models); `threads` conversations run at
    once; `before_conversation` is called before each conversation runs (the optimizer checks its budget
    there: raising stops the evaluation between conversations).
    """

    def __init__(
        self,
        metric: AnswerMetric,
        *,
        memo: ReplayMemo | None = None,
        task_lm: Any = None,
        meta: dict[str, Any] | None = None,
        threads: int = 1,
        before_conversation: Callable[[], None] | None = None,
    ) -> None:
        self.metric = metric
        self.memo = memo if memo is not None else ReplayMemo()
        self.task_lm = task_lm
        self.meta = dict(meta or {})
        self.threads = max(1, threads)
        self.before_conversation = before_conversation

    def run_conversation(self, program: dspy.Module, key: str, questions: Sequence[Question],
                         reuse: Mapping[str, Mapping[str, Any]] | None = None,
                         wrap: Callable[[Any], Any] | None = None) -> TracedConversation:
        """Traces `program` over one conversation's write path and `questions`, replaying through the memo (and
        serving `reuse`, content key -> outputs, first: those calls are marked "scoped" and not learned). `wrap`
        makes the replay control another around the memo's (a scoped replay, `gates/settings.py`)."""
        _, conversation = resolve_conversation(key)
        if self.before_conversation is not None:
            self.before_conversation()
        lm = self.task_lm if self.task_lm is not None else dspy.settings.lm
        model = lm_name(lm)
        control: Any = self.memo.control(key, model)
        if reuse:
            control = _Reusing(control, reuse)
        if wrap is not None:
            control = wrap(control)
        with dspy.context(lm=lm):
            traced = trace_conversation(program, conversation, list(questions), meta=dict(self.meta), replay=control)
        self.memo.learn(key, traced.events, model)
        return traced

    def evaluate(self, program: dspy.Module, cases: Sequence[CaseRef],
                 reuse: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                 wrap: Callable[[Any], Any] | None = None) -> EvalResult:
        """Runs every conversation among `cases` (traced, memoized) and scores each case; `reuse`: per
        conversation key, outputs to serve by content key (a scoped replay); `wrap`: see `run_conversation`."""
        grouped = group_by_conversation(cases)

        def one(key: str) -> tuple[str, TracedConversation]:
            return key, self.run_conversation(program, key, grouped[key], (reuse or {}).get(key), wrap)

        if self.threads > 1 and len(grouped) > 1:
            with ThreadPoolExecutor(max_workers=self.threads) as pool:
                traces = dict(pool.map(one, list(grouped)))
        else:
            traces = dict(one(key) for key in grouped)
        if reuse is None and wrap is None:
            self.memo.note_answered(program_digest(program), [case.case_id for case in cases])
        results = []
        for case in cases:
            traced = traces[case.conversation_key]
            qid = case.question.question_id
            answer = traced.answers.get(qid, "")
            results.append(
                CaseResult(qid, case.conversation_key, case.question, answer, self.metric(case.question, answer),
                           traced.errors.get(qid))
            )
        return EvalResult(
            cases=results,
            traces=traces,
            lm_calls=sum(t.lm_calls for t in traces.values()),
            reused_ops=sum(t.reused_ops for t in traces.values()),
            rerun_ops=sum(t.rerun_ops for t in traces.values()),
        )


class _Reusing:
    """A replay control serving given outputs by content key (marked "scoped"), then the memo's control."""

    def __init__(self, inner: Any, reuse: Mapping[str, Mapping[str, Any]]) -> None:
        self.inner, self.reuse = inner, reuse

    def lookup(self, op: Any, key: str) -> tuple[dict[str, Any], str] | None:
        served = self.reuse.get(key)
        if served is not None:
            return dict(served), "scoped"
        return self.inner.lookup(op, key)
