"""`lineage`: rules over the graph and the evidence, no LM.

Follow the needed information from the evidence turns (gold, else pseudo-evidence) and blame the first place
it stopped (a question whose right answer is to decline is the answer op's fault, ResponseError):
- it reached the answer op's context -> ResponseError at the answer op;
- no memory unit ever held it -> ExtractionError at the write-path op that lost it (else the earliest op
  that consumed the evidence turns);
- units held it but every one was overwritten or deleted before the question -> UpdateError / DeletionError at
  the op that decided that change (Mem0's update decision, long-context trimming);
- a unit held it at question time -> RetrievalError at the read op that dropped it, else the retrieve op.
With a `judge` (the judge role, `_gold.py`), a case whose answer op was shown the needed information and answered it
in other words is a GoldError first; with `config.judge_evidence` also one whose gold evidence turns do not hold the
gold answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from memtrace_opt.attribution._evidence import find_evidence, needed_info
from memtrace_opt.attribution._flow import Flow, analyze
from memtrace_opt.attribution._gold import AnswerJudge, gold_verdict
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._types import FailedCase, Verdict
from memtrace_opt.attribution.protocol import AttributionConfig, make_verdict, register_method

__all__ = ["LineageAttributor", "case_flow", "open_case", "start_case"]


def case_flow(view: GraphView, case: FailedCase, config: AttributionConfig) -> Flow:
    """The information flow of a case (evidence from gold ids, else pseudo-evidence)."""
    evidence = find_evidence(
        view, case.evidence, case.question_text, case.gold, k=config.pseudo_k, embedder=config.embedder
    )
    needed = needed_info(view, evidence, case.question_text, case.gold, case.abstention)
    return analyze(view, case.question_id, evidence, needed)


def open_case(case: FailedCase, graph: nx.MultiDiGraph, config: AttributionConfig, method: str
              ) -> tuple[GraphView, Flow] | Verdict:
    """The case's graph view and information flow, or an error verdict of `method` when the graph cannot be
    followed (the Attributor contract: an error verdict, never a raise)."""
    try:
        view = GraphView.of(graph)
        return view, case_flow(view, case, config)
    except Exception as error:  # noqa: BLE001
        return Verdict.failed(case.case_id, method, f"{type(error).__name__}: {error}")


def start_case(case: FailedCase, graph: nx.MultiDiGraph, config: AttributionConfig, judge: AnswerJudge | None,
               method: str) -> tuple[GraphView, Flow] | Verdict:
    """What every flow-based method opens with: the case's view and flow (`open_case`), or the verdict that ends the
    case before the method's own work, an error verdict or a GoldError (`gold_verdict`)."""
    opened = open_case(case, graph, config, method)
    if isinstance(opened, Verdict):
        return opened
    view, flow = opened
    gold = gold_verdict(case, view, flow, judge, method, judge_evidence=config.judge_evidence)
    return opened if gold is None else gold


@register_method("lineage")
@dataclass(frozen=True)
class LineageAttributor:
    """Rule verdicts from the information flow (see the module docstring)."""

    config: AttributionConfig = AttributionConfig()
    judge: AnswerJudge | None = None
    name: str = "lineage"

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict:
        opened = start_case(case, graph, self.config, self.judge, self.name)
        if isinstance(opened, Verdict):
            return opened
        view, flow = opened
        root = flow.root(view)
        confidence = 0.6 if flow.evidence.source == "gold" else 0.4
        reason = f"{root.reason} (evidence: {flow.evidence.source} {', '.join(flow.evidence.strict[:4])})"
        return make_verdict(case, self.name, view, root.op, root.error_type, reason, confidence)
