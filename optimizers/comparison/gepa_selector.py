"""The ablation: GEPA choosing which predictor to rewrite with our attributor instead of round robin.

GEPA calls its component selector with the minibatch trajectories of the candidate it is about to mutate.
This selector re-traces the failed ones with the candidate's instructions (through the shared replay memo,
which already holds those very calls, so it costs no task LM call), attributes each failure, and names the
most blamed predictor; with no blamed predictor it falls back to GEPA's round robin.
"""

from __future__ import annotations

import logging
from typing import Any

from memtrace_opt.optimizers.core.program_io import with_instruction
from memtrace_opt.optimizers.evaluation.blame import attribute_failures
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.programs.base import MemoryProgram

__all__ = ["AttributedComponentSelector"]

log = logging.getLogger(__name__)

PREFIX = "memory."  # MemoryQA's predictors are the memory program's, under its `memory` attribute


class AttributedComponentSelector:
    """A GEPA `ReflectionComponentSelector` that rewrites the predictor attribution blames."""

    def __init__(self, memory: MemoryProgram, memo: ReplayMemo, *, models: Any, method: str = "graphtrace",
                 metric: AnswerMetric | None = None) -> None:
        self.memory = memory
        self.models = models
        self.method = method
        self.evaluator = CachedEvaluator(metric or AnswerMetric(), memo=memo, task_lm=models.task)
        self.calls = 0

    def _program(self, candidate: dict[str, str]) -> MemoryProgram:
        program = self.memory
        for name, text in candidate.items():
            inner = name.removeprefix(PREFIX)
            if dict(program.named_predictors())[inner].signature.instructions != text:
                program = with_instruction(program, inner, text)
        return program

    def __call__(self, state: Any, trajectories: list[Any], subsample_scores: list[float], candidate_idx: int,
                 candidate: dict[str, str]) -> list[str]:
        self.calls += 1
        failed = [t["example"] for t, s in zip(trajectories or [], subsample_scores, strict=False) if s < 1.0]
        chosen: str | None = None
        if failed:
            try:
                program = self._program(candidate)
                evaluation = self.evaluator.evaluate(program, case_refs(failed))
                blame = attribute_failures(
                    evaluation, evaluation.failed(), method=self.method, lm=self.models.attributor,
                    predictors=[n for n, _ in program.named_predictors()],
                )
                counts = blame.counts()
                chosen = next(iter(counts), None)
            except Exception:  # noqa: BLE001 - the ablation must not crash GEPA; fall back to round robin
                log.exception("attributed component selection failed; using round robin")
        if chosen is not None and PREFIX + chosen in candidate:
            return [PREFIX + chosen]
        return _round_robin(state, candidate_idx)


def _round_robin(state: Any, candidate_idx: int) -> list[str]:
    pid = state.named_predictor_id_to_update_next_for_program_candidate[candidate_idx]
    names = state.list_of_named_predictors
    state.named_predictor_id_to_update_next_for_program_candidate[candidate_idx] = (pid + 1) % len(names)
    return [names[pid]]
