"""`graphtrace`: MemTrace-style attribution, but cheap. Structure first, then small local LM questions.

1. Evidence turns (gold ids, else pseudo-evidence).
2. Follow the needed information through the graph without an LM (`_flow`): which units hold it, whether
   they survived their version chains, whether the read path returned it, whether it reached the answer op.
   That names at most one suspect op per stage (formation, update/delete, retrieval, answer) on the
   information's path, plus the write-path ops that carried it (bounded frontier, execution order).
3. Ask the attributor LM about suspects in execution order, then carriers, one op at a time: given its
   inputs, outputs and job, did it do its own job for the needed information? The verdict is the first op
   judged faulty that is decisive: a faulty op before the answer op is not decisive when the information
   reached the answer op intact anyway.
4. If no op is judged faulty, the information reached the answer op and the evidence does not state the gold
   answer in so many words, one last question: does the evidence support the gold answer? If not: GoldError.
5. Otherwise the structural verdict stands, with low confidence.
A question whose right answer is to decline (abstention) needs no question at all: answering it anyway is
the answer op's fault. With a `judge` (the judge role), GoldError by `_gold.py`'s tests comes first (its test of
the gold evidence only with `config.judge_evidence`).

Where the case can be replayed (`config.confirm` and a `replay_provider` that gives the case a context), a
verdict on an upstream op is confirmed by replaying that op's repair (`_confirm.py`); its repair rejected, the
method tries its next faulty suspects, at most `config.max_replays` repaired replays a case, and moves to one only
when its repair saves the answer: otherwise the first verdict stands, marked unconfirmed. The verdict records
`confirmed` and the `replays`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx

from memtrace_opt.attribution._ask import Asker, evidence_text
from memtrace_opt.attribution._confirm import confirm
from memtrace_opt.attribution._evidence import NeededInfo
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._gold import AnswerJudge
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._render import clip, render_op
from memtrace_opt.attribution._replay import ReplayProvider
from memtrace_opt.attribution._types import GOLD, RETRIEVAL, FailedCase, Verdict
from memtrace_opt.attribution.lineage import start_case
from memtrace_opt.attribution.protocol import AttributionConfig, make_verdict, register_method
from memtrace_opt.attribution.signatures import CheckGold, JudgeOperation

__all__ = ["GraphTraceAttributor", "Candidate", "candidates", "judge_op"]


@dataclass(frozen=True)
class Candidate:
    """An op to question and the error type its fault would be."""

    op: str
    error_type: str
    suspect: bool


def candidates(view: GraphView, flow: Flow, frontier: int = 16) -> list[Candidate]:
    """Suspects (execution order), then the carriers that formed the memory, at most `frontier` in all."""
    found = [Candidate(op, kind, True) for op, kind in flow.suspects(view)]
    seen = {c.op for c in found}
    for op in flow.formation_ops(view):
        if op not in seen:
            kind = view.error_type(op, view.attrs(op).get("outputs")) or "ExtractionError"
            found.append(Candidate(op, kind, False))
            seen.add(op)
    return found[:frontier]


def _unreturned_memory(view: GraphView, flow: Flow, op: str, limit: int = 600) -> str:
    """For a retrieval op: units that held the needed information at question time but the op did not return."""
    returned = set(view.mem_refs(op))
    missing = [n for n in flow.live if n not in returned][:3]
    if not missing:
        return ""
    lines = [f"[{n[4:]}] {clip(view.text(n), limit // len(missing))}" for n in missing]
    return "the store also held (not returned):\n" + "\n".join(lines)


def judge_op(
    asker: Asker, view: GraphView, flow: Flow, case: FailedCase, op: str, evidence: str, chars: int
) -> tuple[bool | None, str]:
    """Ask whether `op` did its own job for the needed information: (faulty or None if unanswered, reason)."""
    extra = ""
    if view.error_type(op) == RETRIEVAL:
        extra = _unreturned_memory(view, flow, op)
    shown = render_op(view, op, chars, extra_inputs=extra)
    reply = asker.ask(
        JudgeOperation,
        question=case.question_text,
        gold_answer=case.gold,
        evidence=evidence,
        operation=shown.job,
        op_inputs=shown.inputs,
        op_outputs=shown.outputs,
    )
    if reply is None:
        return None, ""
    return bool(getattr(reply, "faulty", False)), str(getattr(reply, "reason", ""))


def _evidence_states_gold(view: GraphView, flow: Flow) -> bool:
    """Whether the evidence turns themselves carry the gold answer's words (then no LM question is needed)."""
    answer_only = NeededInfo(flow.needed.question, flow.needed.gold, (), flow.needed.abstention)
    return bool(answer_only.answer_tokens) and answer_only.holds([view.turn_line(t) for t in flow.evidence.turns])


def check_gold(asker: Asker, case: FailedCase, evidence: str) -> tuple[bool | None, str]:
    """Whether the evidence supports the gold answer (None when unanswered)."""
    reply = asker.ask(CheckGold, question=case.question_text, gold_answer=case.gold, evidence=evidence)
    if reply is None:
        return None, ""
    return bool(getattr(reply, "supported", True)), str(getattr(reply, "reason", ""))


@register_method("graphtrace")
@dataclass(frozen=True)
class GraphTraceAttributor:
    """See the module docstring. Budget per case: `config.max_lm_calls` calls, about `config.max_tokens`.
    `replay_provider(case)` gives the case's ReplayContext (or None) for confirmation; `judge` the judge role."""

    config: AttributionConfig = AttributionConfig()
    replay_provider: ReplayProvider | None = None
    judge: AnswerJudge | None = None
    name: str = "graphtrace"

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict:
        opened = start_case(case, graph, self.config, self.judge, self.name)
        if isinstance(opened, Verdict):
            return opened
        view, flow = opened
        with Asker(self.config.max_lm_calls, self.config.max_tokens) as asker:
            verdicts = self._verdicts(case, view, flow, asker)
            if not self.config.confirm or self.replay_provider is None:
                return next(verdicts)
            return confirm(case, graph, view, flow, verdicts, self.replay_provider, asker, self.config.max_replays)

    def _verdicts(self, case: FailedCase, view: GraphView, flow: Flow, asker: Asker) -> Iterator[Verdict]:
        """The method's verdicts, best first: each decisive op the LM judges faulty, in candidate order, then the
        GoldError check, then the structural verdict. Only the first is needed unless a replay rejects it."""
        root = flow.root(view)
        if case.abstention:  # nothing was there to lose: answering instead of declining is the answerer's fault
            yield make_verdict(case, self.name, view, root.op, root.error_type, root.reason, 0.8)
            return
        evidence = evidence_text(view, flow.evidence)
        judged = 0
        for candidate in candidates(view, flow, self.config.frontier):
            if not asker.can_ask():
                break
            faulty, why = judge_op(asker, view, flow, case, candidate.op, evidence, self.config.op_chars)
            if faulty is None:
                continue
            judged += 1
            if not faulty:
                continue
            if candidate.op != flow.answer_op and flow.reached_answer:
                continue  # the information reached the answer op intact: this fault did not decide the failure
            confidence = 0.85 if candidate.op == root.op else 0.7
            yield make_verdict(case, self.name, view, candidate.op, candidate.error_type, why or root.reason, confidence)
        # every op did its job (or could not be judged): is the gold answer itself wrong? Asked last, and only
        # when the information reached the answer: a small attributor doubts correct keys too readily (a
        # relative date, an updated value) to let the question pre-empt the trace
        if (self.config.check_gold and flow.reached_answer and not _evidence_states_gold(view, flow)
                and asker.can_ask()):
            supported, why = check_gold(asker, case, evidence)
            if supported is False:
                confidence = 0.6 if flow.evidence.source == "gold" else 0.4
                yield make_verdict(case, self.name, view, None, GOLD, f"gold answer not supported: {why}", confidence)
                return
        note = "no operation judged faulty" if judged else "the attributor LM gave no usable judgement"
        yield make_verdict(case, self.name, view, root.op, root.error_type, f"{note}; structure: {root.reason}", 0.3)
