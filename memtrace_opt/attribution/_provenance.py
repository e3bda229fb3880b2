"""Provenance: the parts of a value that descend from a question's evidence turns.

Information counts as having reached an op only through parts whose lineage (the graph's edges,
`GraphView.lineage`) descends from an evidence turn of the question (its gold evidence, else pseudo-evidence): a
chunk, an episode or a memory that holds the answer's words by coincidence (a header with the person's name and
the month, a memory that holds the year for another reason) does not count. A part is a memory version, a turn, or
one item of a value (an element of a list: a retrieved unit, a fact); an item that names a unit (`$mem`) or a turn
(`$turn`) has that unit's or turn's lineage; a plain-text item that holds the text of units or turns the value was
made from (a retrieved note rendered as a string) has theirs; any other item the lineage of the value that holds
it. A value that is one text made of many units descends from each of them.

With no evidence turn in the graph there is nothing to trace from, and every part counts (`open`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.attribution._evidence import Evidence
from memtrace_opt.attribution._graph import GraphView, refs_in, value_parts, value_text
from memtrace_opt.tracing._content import MIN_TOKENS, tokens

__all__ = ["Provenance"]


def _joined(words: list[str]) -> str:
    """Word tokens (`tracing._content.tokens`) joined for a substring test, as content lineage matches a copied
    text."""
    return f" {' '.join(words)} "


@dataclass(frozen=True)
class Provenance:
    """The evidence turns of one question over one graph view; lineage is cached on the view."""

    view: GraphView
    turns: frozenset[str]
    _source_text: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, view: GraphView, evidence: Evidence) -> Provenance:
        return cls(view, frozenset(t for t in evidence.turns if t in view.graph))

    @property
    def open(self) -> bool:
        """No evidence turn to trace from: every part counts."""
        return not self.turns

    def descends(self, node: str) -> bool:
        """Whether a node (a value, a memory version, a turn, an op's inputs) descends from an evidence turn."""
        return self.open or bool(self.view.lineage(node) & self.turns)

    def parts(self, node: str) -> list[str]:
        """A node's parts (`GraphView.parts`) that descend from an evidence turn."""
        view = self.view
        if self.open:
            return view.parts(node)
        if view.is_mem(node) or view.is_turn(node):
            return view.parts(node) if self.descends(node) else []
        sources = self._sources(view.producers(node))
        return self._value_parts(view.attrs(node).get("value"), view.lineage(node), sources)

    def input_parts(self, op: str) -> list[str]:
        """The parts of an op's inputs that descend from an evidence turn (the question itself left out), as
        `GraphView.input_parts` gives them all."""
        if self.open:
            return self.view.input_parts(op)
        parts = [p for v in self.view.inputs(op) if not v.startswith("q:") for p in self.parts(v)]
        recorded = self.view.attrs(op).get("inputs")
        if isinstance(recorded, Mapping):
            lineage, sources = self.view.lineage(op), self._sources([op])
            for key, value in recorded.items():
                if key != "question":
                    parts.extend(self._value_parts(value, lineage, sources))
        return parts

    def output_parts(self, op: str) -> list[str]:
        """The parts of an op's outputs that descend from an evidence turn."""
        if self.open:
            return self.view.output_parts(op)
        parts = [p for v in self.view.outputs(op) for p in self.parts(v)]
        recorded = self.view.attrs(op).get("outputs")
        if isinstance(recorded, Mapping):
            lineage, sources = self.view.lineage(op), self._sources([op])
            for value in recorded.values():
                parts.extend(self._value_parts(value, lineage, sources))
        return parts

    def _sources(self, ops: Iterable[str]) -> list[str]:
        """The memory versions and turns the ops read, directly or through a value an earlier op made of them: the
        texts a plain-string item of their values may hold."""
        view = self.view
        found: dict[str, None] = {}
        for op in ops:
            for node in view.inputs(op):
                if view.is_mem(node) or view.is_turn(node):
                    found.setdefault(node)
                elif not node.startswith("q:"):
                    for source in view.producers(node):
                        for inner in view.inputs(source):
                            if view.is_mem(inner) or view.is_turn(inner):
                                found.setdefault(inner)
        return list(found)

    def _source_words(self, node: str) -> str:
        found = self._source_text.get(node)
        if found is None:
            view = self.view
            text = view.turn_text(node) if view.is_turn(node) else value_text(view.attrs(node).get("value"))
            words = tokens(text)
            found = _joined(words) if len(words) >= MIN_TOKENS else ""
            self._source_text[node] = found
        return found

    def _value_parts(self, value: Any, lineage: frozenset[str], sources: Sequence[str] = ()) -> list[str]:
        """The items of a JSON value that descend from an evidence turn; an item naming units or turns has theirs,
        a plain-text item holding the text of some of `sources` theirs, any other item `lineage` (the value's
        own)."""
        if self.open:
            return value_parts(value)
        items = value if isinstance(value, (list, tuple)) else [value]
        found = []
        for item in items:
            text = value_text(item)
            if text and self._item_lineage(item, lineage, sources, text) & self.turns:
                found.append(text)
        return found

    def _item_lineage(self, item: Any, lineage: frozenset[str], sources: Sequence[str], text: str) -> frozenset[str]:
        named = [ref for ref in refs_in(item) if not ref.startswith("q:")]
        if not named:
            if sources:
                words = _joined(tokens(text))
                held = [s for s in sources if (w := self._source_words(s)) and w in words]
                if held:
                    return frozenset().union(*(self.view.lineage(s) for s in held))
            return lineage
        found: set[str] = set()
        for ref in named:
            if ref in self.view.graph:
                found |= self.view.lineage(ref)
            elif ref.startswith("turn:"):
                found.add(ref)
            elif isinstance(item, Mapping) and item.get("$mem") == ref:
                found |= {t if str(t).startswith("turn:") else f"turn:{t}" for t in item.get("source_turns") or ()}
        return frozenset(found)
