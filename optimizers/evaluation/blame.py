"""From failed cases to blame per predictor: attribute each failure, map its root-cause op to the predictor
behind it, and count the failures no prompt can fix.

A verdict whose op is LM-backed names a predictor (the graph's `predictor` attribute, a name from the traced
program's `named_predictors()`): that predictor is blamed. A verdict on a non-LM op (a retrieval's top-k, a
chunker, a trimmer) is counted under the op's name in `not_fixable`, as are `GoldError` verdicts (under
"GoldError") and cases attribution could not explain (under "unattributed"). A GoldError case is left out of the
training signal altogether: no predictor is blamed for it, and the loop drops its question from the local set and
the settings objective (`gold_errors`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution import GOLD, AttributionConfig, FailedCase, Verdict, attribute_cases
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult

__all__ = ["Blame", "attribute_failures", "blame_of", "failed_cases", "gold_errors", "op_seq", "UNATTRIBUTED"]

log = logging.getLogger(__name__)

UNATTRIBUTED = "unattributed"


@dataclass
class Blame:
    """Verdicts of one round's failures, grouped by blamed predictor."""

    verdicts: list[Verdict] = field(default_factory=list)
    by_predictor: dict[str, list[Verdict]] = field(default_factory=dict)
    not_fixable: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """predictor -> number of failures blamed on it, most blamed first; ties: the predictor blamed at the
        earliest op first (upstream: what it gets wrong, every later op sees), then by name."""
        def earliest(verdicts: list[Verdict]) -> int:
            return min((seq for v in verdicts if (seq := op_seq(v.op_id)) is not None), default=_NO_SEQ)

        pairs = sorted(((p, len(v), earliest(v)) for p, v in self.by_predictor.items()),
                       key=lambda kv: (-kv[1], kv[2], kv[0]))
        return {p: n for p, n, _ in pairs}


_NO_SEQ = 1 << 62


def op_seq(op_id: str | None) -> int | None:
    """The seq of an `op:{seq}` id; None for anything else."""
    head, _, tail = (op_id or "").partition(":")
    return int(tail) if head == "op" and tail.isdigit() else None


def _failed_case(result: CaseResult, graph: Any, system: str) -> FailedCase:
    question = result.question
    return FailedCase(
        case_id=result.case_id,
        question=question,
        gold=question.answer,
        prediction=result.prediction,
        evidence=tuple(question.evidence),
        system=system,
        sample_id=result.conversation_key.split("@", 1)[0],
        graph=graph,
    )


def attribute_failures(
    evaluation: EvalResult,
    failures: Sequence[CaseResult],
    *,
    method: Any = "lineage",
    lm: Any = None,
    predictors: Collection[str] | None = None,
    system: str = "",
    config: AttributionConfig | None = None,
    num_threads: int = 1,
) -> Blame:
    """Attribute `failures` (cases of `evaluation`) with `method` (a registered name or an Attributor) under
    the attributor `lm`, `num_threads` cases at a time; blame goes to predictors in `predictors` (default: any
    named by a verdict)."""
    cases = failed_cases(evaluation, failures, system)
    verdicts = attribute_cases(cases, method, lm=lm, config=config, num_threads=num_threads) if cases else []
    return blame_of(verdicts, predictors)


def failed_cases(evaluation: EvalResult, failures: Sequence[CaseResult], system: str = "") -> list[FailedCase]:
    """`failures` (cases of `evaluation`) as attribution takes them: each with its conversation's graph."""
    graphs: dict[str, Any] = {}
    cases = []
    for result in failures:
        key = result.conversation_key
        if key not in graphs:
            graphs[key] = evaluation.traces[key].graph()
        cases.append(_failed_case(result, graphs[key], system))
    return cases


def gold_errors(verdicts: Iterable[Verdict]) -> frozenset[str]:
    """The cases `verdicts` find to be GoldError: their gold answer, not the program, is at fault."""
    return frozenset(v.case_id for v in verdicts if v.error is None and v.error_type == GOLD)


def blame_of(verdicts: Sequence[Verdict], predictors: Collection[str] | None = None) -> Blame:
    """The verdicts grouped by blamed predictor (those in `predictors`; default: any a verdict names), and the
    failures no prompt can fix counted by why."""
    blame = Blame(verdicts=list(verdicts))
    not_fixable: Counter[str] = Counter()
    for verdict in verdicts:
        if verdict.error is not None or verdict.error_type is None:
            not_fixable[UNATTRIBUTED] += 1
        elif verdict.error_type == GOLD:
            not_fixable[GOLD] += 1
        elif verdict.predictor and (predictors is None or verdict.predictor in predictors):
            blame.by_predictor.setdefault(verdict.predictor, []).append(verdict)
        else:
            not_fixable[verdict.op or UNATTRIBUTED] += 1
    blame.not_fixable = dict(sorted(not_fixable.items()))
    log.info("blame: %s; not fixable by prompts: %s", blame.counts(), blame.not_fixable)
    return blame
