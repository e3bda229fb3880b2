"""`MemoryAdapter`: how the optimizer reaches a memory program, and nothing else does.

The loop never runs a program, reads its predictors or sets its settings but through this adapter (GEPA's
adapter is the model: the engine evaluates through it, builds its reflective dataset from it, and asks it what a
program's components are):

- `evaluate(program, cases)`: the cases answered, traced, scored (`CachedEvaluator`: the replay memo serves what
  did not change);
- `write_path(program, cases)`: only the write path of the cases' conversations traced, no question answered:
  what the local set of an op that forms or updates memory is built from;
- `reflective(...)`: the evidence a proposer is shown for a predictor (`evidence.build_evidence`);
- `predictors(program)`, `tunables(program, ops)`: the components a candidate may change (prompts and settings);
- `reply_chars(program, predictor)`: a predictor's reply cap in characters.

    adapter = MemoryAdapter(evaluator)
    run = adapter.evaluate(program, minibatch)
    memory = adapter.write_path(program, trainset)      # traces, each case unanswered
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from memtrace_opt.optimizers.core.program_io import program_digest
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.examples import CaseRef, group_by_conversation
from memtrace_opt.optimizers.evaluation.memo import lm_name
from memtrace_opt.optimizers.evaluation.metric import CaseScore
from memtrace_opt.programs.tunable import tunables_for

__all__ = ["CHARS_PER_TOKEN", "MemoryAdapter"]

CHARS_PER_TOKEN = 4  # a reply cap in tokens, in characters (the programs' own estimate)


class MemoryAdapter:
    """The optimizer's one way into a memory program (module doc)."""

    def __init__(self, evaluator: CachedEvaluator) -> None:
        self.evaluator = evaluator

    @property
    def memo(self) -> Any:
        return self.evaluator.memo

    def knows(self, conversation_key: str) -> bool:
        """Whether the replay memo holds any of this conversation's op calls for the task model (its write path
        then costs nothing to trace again while the program is unchanged)."""
        return bool(self.memo.knows(conversation_key, lm_name(self.evaluator.task_lm)))

    def evaluate(self, program: dspy.Module, cases: Sequence[CaseRef], *,
                 reuse: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None, wrap: Any = None) -> EvalResult:
        return self.evaluator.evaluate(program, cases, reuse=reuse, wrap=wrap)

    def unanswered(self, program: dspy.Module, cases: Sequence[CaseRef]) -> list[CaseRef]:
        """The cases the memo has no answer of `program`, as it is, to (pricing: those cost live calls; a
        comparison's warm-up answered every question with the seed)."""
        digest = program_digest(program)
        return [case for case in cases if not self.memo.answered(digest, case.case_id)]

    def write_path(self, program: dspy.Module, cases: Sequence[CaseRef]) -> EvalResult:
        """The write path of the conversations of `cases`, traced with no question asked: each case comes back
        unanswered (its prediction empty, not correct), with its conversation's trace."""
        traces = {key: self.evaluator.run_conversation(program, key, [])
                  for key in group_by_conversation(cases)}
        unanswered = CaseScore(False, {})
        results = [CaseResult(case.case_id, case.conversation_key, case.question, "", unanswered) for case in cases]
        return EvalResult(results, traces, lm_calls=sum(t.lm_calls for t in traces.values()),
                          reused_ops=sum(t.reused_ops for t in traces.values()),
                          rerun_ops=sum(t.rerun_ops for t in traces.values()))

    @staticmethod
    def predictors(program: dspy.Module) -> list[str]:
        """The program's predictors, in its own order (the pipeline's, for the built-in systems)."""
        return [name for name, _ in program.named_predictors()]

    @staticmethod
    def tunables(program: dspy.Module, ops: Sequence[str]) -> list[Any]:
        """The tunable settings the ops named `ops` declare (`programs/tunable.py`)."""
        return list(tunables_for(program.config, list(ops)))

    @staticmethod
    def reply_chars(program: dspy.Module, predictor: str) -> int:
        """The predictor's reply cap (`max_tokens` of its call configuration) in characters; 0 when it has none."""
        cap = dict(program.named_predictors())[predictor].config.get("max_tokens")
        return int(cap) * CHARS_PER_TOKEN if cap else 0
