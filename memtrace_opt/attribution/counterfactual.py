"""`counterfactual`: graphtrace's candidates confirmed by executable replay.

First the recorded run is replayed unchanged: if that does not reproduce the failure, nothing can be
confirmed. Then for each candidate op (graphtrace's verdict first, then the others in execution order, at
most `config.max_replays`), repair its outputs and replay the conversation with them forced
(`memtrace_opt.tracing.replay(..., forced={seq: outputs})`); unchanged ops come from the record, later ops
run live. The first candidate whose repair makes the answer correct is the verdict (the repairs: `_replay.py`).
Store-writing ops cannot be forced; the answer op is never replayed (setting the answer is no test): it is
the verdict when the information reached it intact and no earlier repair saves the answer. Without a
replay context for the case (program + conversation), graphtrace's verdict stands, marked unconfirmed.
The verdict records `confirmed` and its `replays`, and its cost the task model's calls during them (`replay_calls`,
apart from the attributor's `lm_calls`). The replay machinery is `_replay.py`'s, which graphtrace's own
confirmation shares; `ReplayContext`, `ReplayProvider`, `repair_outputs` and `case_question` stay importable
from here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import networkx as nx

from memtrace_opt.attribution._ask import Asker
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._gold import AnswerJudge
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._replay import (
    CaseReplayer,
    ReplayContext,
    ReplayProvider,
    case_question,
    repair_outputs,
)
from memtrace_opt.attribution._types import GOLD, RESPONSE, FailedCase, Verdict
from memtrace_opt.attribution.graphtrace import GraphTraceAttributor, candidates
from memtrace_opt.attribution.lineage import case_flow
from memtrace_opt.attribution.protocol import AttributionConfig, make_verdict, register_method

__all__ = ["ReplayContext", "ReplayProvider", "CounterfactualAttributor", "repair_outputs", "case_question"]

log = logging.getLogger(__name__)


# the method -----------------------------------------------------------------------------------------------
@register_method("counterfactual")
@dataclass(frozen=True)
class CounterfactualAttributor:
    """See the module docstring. `replay_provider(case)` gives the case's ReplayContext (or None); `judge` (the
    judge role) is graphtrace's, for its GoldError tests."""

    config: AttributionConfig = AttributionConfig()
    replay_provider: ReplayProvider | None = None
    judge: AnswerJudge | None = None
    name: str = "counterfactual"

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict:
        seed = GraphTraceAttributor(self.config, judge=self.judge).attribute(case, graph)
        seed = replace(seed, method=self.name)
        if seed.error is not None or seed.error_type == GOLD:
            return seed
        try:
            view = GraphView.of(graph)
            flow = case_flow(view, case, self.config)
            context = self.replay_provider(case) if self.replay_provider is not None else None
        except Exception as error:  # noqa: BLE001 - contract: an error verdict, never a raise
            return Verdict.failed(case.case_id, self.name, f"{type(error).__name__}: {error}")
        if context is None:
            return replace(seed, reason=f"{seed.reason} (unconfirmed: no replay context)", confidence=min(seed.confidence, 0.5))
        replayer: CaseReplayer | None = None
        try:
            replayer = CaseReplayer(case, graph, view, flow, context)
            return self._confirm(case, view, flow, seed, replayer)
        except Exception as error:  # noqa: BLE001
            log.warning("counterfactual replay of %s failed: %s", case.case_id, error)
            failed = replace(seed, reason=f"{seed.reason} (unconfirmed: replay failed: {error})", confidence=min(seed.confidence, 0.5))
            return replayer.charged(failed) if replayer is not None else failed

    def _order(self, view: GraphView, flow: Flow, seed: Verdict) -> list[tuple[str, str]]:
        found = [(c.op, c.error_type) for c in candidates(view, flow, self.config.frontier)]
        if seed.op_id is not None and seed.error_type is not None:
            found = [(seed.op_id, seed.error_type)] + [c for c in found if c[0] != seed.op_id]
        return found

    def _confirm(self, case: FailedCase, view: GraphView, flow: Flow, seed: Verdict, replayer: CaseReplayer) -> Verdict:
        if not replayer.reproduces():
            note = f"unconfirmed: the replay does not reproduce the failure (it answers {replayer.reproduced_answer!r})"
            return replayer.recorded(seed, reason=f"{seed.reason} ({note})", confidence=min(seed.confidence, 0.5))
        with Asker(self.config.max_lm_calls, self.config.max_tokens) as asker:
            for op, error_type in self._order(view, flow, seed):
                if replayer.repaired >= self.config.max_replays:
                    break
                replay = replayer.try_repair(op, asker)
                if replay is not None and replay.correct:
                    reason = f"repairing {view.op_name(op)} ({op}) and replaying answers {replay.answer!r}, which is correct"
                    verdict = make_verdict(case, self.name, view, op, error_type, reason, 0.95)
                    return replayer.recorded(verdict, confirmed=True)
        tried = [r.op_id or "" for r in replayer.replays if r.op_id is not None]
        if flow.reached_answer or seed.op_id == flow.answer_op:
            reason = f"the needed information reached the answer op; repairs of {len(tried)} earlier ops did not save it"
            verdict = make_verdict(case, self.name, view, flow.answer_op, RESPONSE, reason, 0.7)
            return replayer.recorded(verdict)
        note = f"unconfirmed: {len(tried)} replays with repaired outputs ({', '.join(tried) or 'none'}) did not fix it"
        return replayer.recorded(seed, reason=f"{seed.reason} ({note})", confidence=min(seed.confidence, 0.5),
                                 confirmed=False if seed.op_id in tried else None)
