"""Structure first: follow the needed information through the evolution graph, without an LM.

From the evidence turns the information flows forward through write-path ops into memory units (formation),
along each unit's version chain (updates, deletes, trimming), and through the question's read path
(retrieval, merging, the answer op). `analyze` records where it was carried and where it stopped, using
`NeededInfo.holds` as the test of "still carries the information", on the parts of values that descend from an
evidence turn (`_provenance.py`): words that reach an op by coincidence, through units formed from other turns,
do not count. On the write path a fact written with a pronoun or a relative date (`NeededInfo.written`) counts as
held by the call that wrote it, so an update that then drops it is where the information stopped; it counts as
live at question time only when it holds the information by the strict test. `Flow.root()` is the rule verdict
(the lineage method); `Flow.suspects()` the ops an LM should be asked about, one per stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memtrace_opt.attribution._evidence import Evidence, NeededInfo
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._provenance import Provenance
from memtrace_opt.attribution._types import (
    DELETION,
    EXTRACTION,
    RESPONSE,
    RETRIEVAL,
    UPDATE,
)

__all__ = ["Carrying", "Flow", "Root", "Transition", "analyze", "FlowError"]


class FlowError(ValueError):
    """The graph has nothing to attribute for this question (e.g. no answer op)."""


@dataclass(frozen=True)
class Transition:
    """A version change of a unit that held the needed information into one that does not."""

    before: str
    after: str
    writer: str
    decider: str
    deleted: bool
    error_type: str


@dataclass(frozen=True)
class Root:
    """A rule verdict: the op, its error type, and why."""

    op: str
    error_type: str
    reason: str


@dataclass(frozen=True)
class Carrying:
    """The needed-information tests of one question, on the parts that descend from its evidence turns: `holds` a
    node (strictly), `carries` a node on the write path (strictly, or as a fact written with a pronoun or a
    relative date), `reads` / `passes` an op's inputs / outputs (strictly)."""

    needed: NeededInfo
    provenance: Provenance

    def holds(self, node: str) -> bool:
        return self.needed.holds(self.provenance.parts(node))

    def carries(self, node: str) -> bool:
        parts = self.provenance.parts(node)
        return self.needed.holds(parts) or self.needed.written(parts)

    def reads(self, op: str) -> bool:
        return self.needed.holds(self.provenance.input_parts(op))

    def passes(self, op: str) -> bool:
        return self.needed.holds(self.provenance.output_parts(op))


@dataclass(frozen=True)
class Flow:
    """Where the needed information of one question went."""

    question_id: str
    answer_op: str
    read_ops: tuple[str, ...]
    question_seq: int
    evidence: Evidence
    needed: NeededInfo
    consumers: tuple[str, ...]
    carriers: tuple[str, ...]
    losses: tuple[str, ...]
    drops: tuple[str, ...]
    formed: tuple[str, ...]
    evidence_units: tuple[str, ...]
    transitions: tuple[Transition, ...]
    unit_losses: tuple[Transition, ...]
    unit_changes: tuple[Transition, ...]
    live: tuple[str, ...]
    retrieved: tuple[str, ...]
    read_drop: str | None
    first_retrieval: str | None
    first_returned: bool
    reached_answer: bool
    answer_score: float

    def root(self, view: GraphView) -> Root:
        """The rule verdict (see the lineage method)."""
        name = view.op_name
        if self.needed.abstention:
            return Root(self.answer_op, RESPONSE, "the question asks for something never said; the answer op should have declined")
        if self.reached_answer:
            return Root(self.answer_op, RESPONSE, "the needed information reached the answer op, which did not use it")
        if not self.formed or not (self.live or self.transitions):
            lost = self.losses + (self.drops if not self.formed else ())
            # memory held it only as written with a pronoun or a relative date: the call that wrote it so
            writer = None if lost or not self.formed else _first_of(view, self.formation_ops(view), EXTRACTION)
            op = min(lost, key=view.seq) if lost else writer or _first_of(view, self.consumers, EXTRACTION)
            if op is None:
                op = _first_write_op(view, self.read_ops)
            if op is None:
                return Root(self.answer_op, RESPONSE, "no operation formed memory from the evidence turns")
            if op == writer:
                return Root(op, _loss_type(view, op), f"memory held the needed information only as {name(op)} wrote it, "
                            "with a pronoun or a relative date in place of who or when")
            how = "lost the needed information" if op in lost else "consumed the evidence turns"
            return Root(op, _loss_type(view, op), f"no memory unit ever held the needed information; {name(op)} {how}")
        if not self.live:
            first = self.transitions[0]
            verb = "deleted" if first.error_type == DELETION else "overwrote"
            return Root(
                first.decider,
                first.error_type,
                f"{view.unit_id(first.before)} held the needed information until {name(first.decider)} {verb} it",
            )
        if self.read_drop is not None and self.first_returned:
            return Root(self.read_drop, RETRIEVAL, f"{name(self.read_drop)} received the needed information and dropped it")
        op = self.first_retrieval or self.read_drop or self.answer_op
        units = ", ".join(view.unit_id(u) for u in self.live[:3])
        return Root(op, RETRIEVAL, f"{units} held the needed information at question time but was not retrieved")

    def suspects(self, view: GraphView) -> list[tuple[str, str]]:
        """(op, error type) pairs to question, one group per pipeline stage, in execution order."""
        found: list[tuple[str, str]] = []
        if not self.formed:
            # where the information was lost; the first extraction consumer only when no op is seen losing it
            # (an op that carried it on is no suspect)
            first = self.losses[:2] or self.drops[:1] or tuple(
                x for x in (_first_of(view, self.consumers, EXTRACTION),) if x)
            found.extend((op, _loss_type(view, op)) for op in first)
        changes = list(self.unit_losses[:2]) or (list(self.unit_changes[:1]) if not self.formed else [])
        found.extend((change.decider, change.error_type) for change in changes)
        if self.read_drop is not None and self.first_returned:
            found.append((self.read_drop, RETRIEVAL))
        if self.first_retrieval is not None and self.first_retrieval != self.read_drop:
            found.append((self.first_retrieval, RETRIEVAL))
        found.append((self.answer_op, RESPONSE))
        unique = {op: kind for op, kind in found}
        return sorted(unique.items(), key=lambda item: view.seq(item[0]))

    def formation_ops(self, view: GraphView) -> list[str]:
        """Write-path ops that carried the information into memory (LM-backed first)."""
        return sorted(self.carriers, key=lambda op: (view.predictor(op) is None, view.seq(op)))

    def carrying(self, view: GraphView) -> Carrying:
        """The needed-information tests of this question over `view` (the graph the flow was followed in)."""
        return Carrying(self.needed, Provenance.of(view, self.evidence))

    def reached(self, view: GraphView, op: str) -> bool:
        """Whether the needed information reached `op`: its inputs hold it in parts that descend from an evidence
        turn (a coincidental holder does not count)."""
        return self.carrying(view).reads(op)


def _loss_type(view: GraphView, op: str) -> str:
    """The error type of losing the information before it reached memory: an update decision's (a fact it
    should have written: a skipped write, never a deletion) or else an extraction's."""
    return UPDATE if view.error_type(op) in (UPDATE, DELETION) else EXTRACTION


def _first_of(view: GraphView, ops: tuple[str, ...] | list[str], error_type: str) -> str | None:
    typed = [op for op in ops if view.error_type(op) == error_type]
    found = typed or list(ops)
    return found[0] if found else None


def _first_write_op(view: GraphView, read_ops: tuple[str, ...]) -> str | None:
    reads = set(read_ops)
    for op in view.ops:
        if op not in reads and view.error_type(op) == EXTRACTION:
            return op
    return None


@dataclass(frozen=True)
class _Formed:
    """Step 1 of `analyze`: where the evidence turns' information went on the write path."""

    consumers: list[str]
    carriers: list[str]
    losses: list[str]
    drops: list[str]
    formed: set[str]


@dataclass(frozen=True)
class _ReadPath:
    """Step 3 of `analyze`: what the question's read path retrieved and where it dropped the information."""

    retrieved: list[str]
    read_drop: str | None
    first_retrieval: str | None


def analyze(view: GraphView, question_id: str, evidence: Evidence, needed: NeededInfo) -> Flow:
    """Follow the needed information of `question_id` through the graph. Raises FlowError."""
    answer_op = view.answer_op(question_id)
    if answer_op is None:
        raise FlowError(f"the graph has no answer op for question {question_id!r}")
    read_ops = tuple(view.read_path(answer_op, question_id))
    question_seq = view.seq(read_ops[0])
    test = Carrying(needed, Provenance.of(view, evidence))
    answer_score = needed.score(test.provenance.input_parts(answer_op))

    formation = _form(view, evidence, read_ops, question_seq, test)
    # 2. version chains: does a unit that held it still hold it at question time?
    evidence_units = _evidence_units(view, evidence)
    transitions, live = _chains(view, formation.formed, question_seq, test)
    # an op that ran before the evidence was first processed cannot have lost it: changes start there
    said = min((view.seq(op) for op in formation.consumers), default=-1)
    touched = evidence_units | {view.unit_id(n) for n in formation.formed}
    unit_losses, unit_changes = _changes(view, touched, question_seq, test, said)
    read = _read_path(view, read_ops, answer_op, test, answer_score)

    return Flow(
        question_id=question_id,
        answer_op=answer_op,
        read_ops=read_ops,
        question_seq=question_seq,
        evidence=evidence,
        needed=needed,
        consumers=tuple(formation.consumers),
        carriers=tuple(formation.carriers),
        losses=tuple(formation.losses),
        drops=tuple(formation.drops),
        formed=tuple(sorted(formation.formed, key=view.written_at)),
        evidence_units=tuple(sorted(evidence_units)),
        transitions=tuple(transitions),
        unit_losses=tuple(unit_losses),
        unit_changes=tuple(unit_changes),
        live=tuple(live),
        retrieved=tuple(dict.fromkeys(read.retrieved)),
        read_drop=read.read_drop,
        first_retrieval=read.first_retrieval,
        first_returned=read.first_retrieval is not None and test.passes(read.first_retrieval),
        reached_answer=answer_score >= 1.0,
        answer_score=answer_score,
    )


def _form(view: GraphView, evidence: Evidence, read_ops: tuple[str, ...], question_seq: int, test: Carrying) -> _Formed:
    """Step 1, formation: evidence turns -> write-path ops -> memory units (of a kind the read path returns)."""
    reads = set(read_ops)
    retrievable = _retrievable_kinds(view, read_ops)
    start = [t for t in (evidence.strict or evidence.turns) if t in view.graph]
    consumers = sorted(
        {op for t in evidence.turns if t in view.graph for op in view.consumers(t) if op not in reads
         and op not in view.all_read_ops},
        key=view.seq,
    )
    carriers, losses, drops, formed_nodes = _formation(view, start, reads | view.all_read_ops, test.carries)
    formed = {n for n in formed_nodes if view.unit_kind(n) in retrievable or not retrievable}
    for chain in view.units.values():  # information that reached memory by another path from the evidence counts
        for node in chain:
            if view.written_at(node) < question_seq and not view.deleted(node) and test.carries(node):
                if not retrievable or view.unit_kind(node) in retrievable:
                    formed.add(node)
    return _Formed(consumers, carriers, losses, drops, formed)


def _read_path(view: GraphView, read_ops: tuple[str, ...], answer_op: str, test: Carrying, answer_score: float
               ) -> _ReadPath:
    """Step 3, the read path up to the answer op: the holding units it retrieved, the first op that received
    the information and passed it on no further, and the first retrieval op."""
    retrieved: list[str] = []
    read_drop: str | None = None
    first_retrieval: str | None = None
    for op in read_ops:
        if op == answer_op:
            break
        passes = view.returns_units(op)
        if first_retrieval is None and passes and view.error_type(op) == RETRIEVAL:
            first_retrieval = op
        refs = view.mem_refs(op)
        if not passes and view.error_type(op) == RETRIEVAL:
            continue  # it judges or plans (a sufficiency check, a query writer): it never drops what it reads
        retrieved.extend(r for r in refs if r in view.graph and test.holds(r))
        had = test.reads(op) or any(test.holds(r) for r in refs if r in view.graph)
        if read_drop is None and had and not test.passes(op) and answer_score < 1.0:
            read_drop = op
    if first_retrieval is None:
        first_retrieval = next(
            (op for op in read_ops if view.error_type(op) == RETRIEVAL), None
        )
    return _ReadPath(retrieved, read_drop, first_retrieval)


def _retrievable_kinds(view: GraphView, read_ops: tuple[str, ...]) -> set[str]:
    """Kinds of units the read path returns (this question's, else any retrieval op's)."""
    kinds = {view.unit_kind(r) for op in read_ops for r in view.mem_refs(op) if r in view.graph}
    if kinds:
        return kinds
    return {
        view.unit_kind(r)
        for op in view.ops
        if view.error_type(op) == RETRIEVAL
        for r in view.mem_refs(op)
        if r in view.graph
    }


def _formation(
    view: GraphView, start: list[str], reads: set[str], carries: Callable[[str], bool]
) -> tuple[list[str], list[str], list[str], set[str]]:
    """Forward from the evidence turns through write-path ops, never into a unit's own next version.

    Returns (carriers, decisive losses, drops, memory versions reached holding the information). A loss is
    decisive when no consumer of a holding value carried the information on; a drop is an update decision
    that did not carry it while another consumer did (Mem0's decision skipping a fact that the similarity
    search passed on to nothing).
    """
    carriers: list[str] = []
    losses: list[str] = []
    drops: list[str] = []
    formed: set[str] = set()
    holding = set(start)
    queue = list(start)
    done: set[str] = set()
    while queue:
        node = queue.pop(0)
        ops = [op for op in view.consumers(node) if op not in reads and not _rewrites(view, op, node)]
        if not ops:
            continue
        carried = False
        dropped: list[str] = []
        for op in ops:
            outs = [o for o in view.outputs(op) if o not in holding and carries(o)]
            outs += [o for o in view.outputs(op) if o in holding]
            if not outs and view.predictor(op) and view.error_type(op) in (UPDATE, DELETION):
                dropped.append(op)
            if outs:
                carried = True
                if op not in done:
                    done.add(op)
                    carriers.append(op)
                for out in outs:
                    if out not in holding:
                        holding.add(out)
                        queue.append(out)
                    if view.is_mem(out):
                        formed.add(out)
        if not carried:
            typed = [op for op in ops if view.predictor(op) or view.error_type(op) == EXTRACTION]
            loss = (typed or ops)[0]
            if loss not in losses:
                losses.append(loss)
        else:
            drops.extend(op for op in dropped if op not in drops)
    carriers.sort(key=view.seq)
    losses.sort(key=view.seq)
    drops = sorted((op for op in drops if op not in carriers), key=view.seq)
    return carriers, losses, drops, formed


def _rewrites(view: GraphView, op: str, node: str) -> bool:
    """Whether `op` writes a new version of the unit `node` is a version of (an update/delete/trim)."""
    if not view.is_mem(node):
        return False
    unit = view.unit_id(node)
    return any(view.is_mem(o) and view.unit_id(o) == unit for o in view.outputs(op))


def _evidence_units(view: GraphView, evidence: Evidence) -> set[str]:
    turns = set(evidence.strict or evidence.turns)
    return {
        unit for unit, chain in view.units.items() if any(view.source_turns(node) & turns for node in chain)
    }


def _transition(view: GraphView, before: str, after: str) -> Transition:
    writers = view.producers(after)
    writer = min(writers, key=view.seq) if writers else after
    decider = view.decider(writer) if writers else writer
    deleted = view.deleted(after)
    if deleted or view.error_type(writer) == DELETION:
        kind = DELETION
    else:
        mapped = view.error_type(decider, view.attrs(decider).get("outputs"))
        kind = mapped if mapped in (UPDATE, DELETION) else UPDATE
    return Transition(before, after, writer, decider, deleted, kind)


def _chains(view: GraphView, formed: set[str], question_seq: int, test: Carrying) -> tuple[list[Transition], list[str]]:
    """For each unit that held the information: the change that lost it (a version that no longer carries it, or
    no longer holds it strictly where the one before did), or the version live at question time when that holds it
    strictly."""
    transitions: list[Transition] = []
    live: list[str] = []
    for unit in sorted({view.unit_id(n) for n in formed}):
        chain = [n for n in view.units.get(unit, []) if view.written_at(n) < question_seq]
        held = [n for n in chain if n in formed]
        if not held:
            continue
        index = chain.index(held[0])
        lost = None
        for before, after in zip(chain[index:], chain[index + 1 :], strict=False):
            if _loses(view, test, before, after):
                lost = _transition(view, before, after)
                break
        if lost is None:
            if test.holds(chain[-1]):
                live.append(chain[-1])
        else:
            transitions.append(lost)
    transitions.sort(key=lambda t: view.seq(t.writer))
    return transitions, live


def _loses(view: GraphView, test: Carrying, before: str, after: str) -> bool:
    """Whether the version change `before` -> `after` lost the information `before` carried."""
    return view.deleted(after) or not test.carries(after) or (test.holds(before) and not test.holds(after))


def _changes(
    view: GraphView, units: set[str], question_seq: int, test: Carrying, said: int
) -> tuple[list[Transition], list[Transition]]:
    """Updates/deletes of these units after the evidence was first processed (`said`, the seq of its first
    consumer) and before the question, earliest first: (those that lost the needed information, the others).
    A unit formed from a window that holds an evidence turn may have changed before that turn was said; such
    a change cannot have lost it."""
    changes: list[Transition] = []
    for unit in sorted(units):
        chain = [n for n in view.units.get(unit, []) if view.written_at(n) < question_seq]
        for before, after in zip(chain, chain[1:], strict=False):
            if view.producers(after) and view.written_at(after) > said:
                changes.append(_transition(view, before, after))
    lost = [c for c in changes if test.carries(c.before) and (c.deleted or _loses(view, test, c.before, c.after))]
    rest = [c for c in changes if c not in lost]
    return sorted(lost, key=lambda c: view.seq(c.writer)), sorted(rest, key=lambda c: view.seq(c.writer))

