"""The builder behind `build_graph`: nodes and edges collected in ordered dicts, the value-flow indexes, and
the bulk fill of the networkx graph. Private: see `memtrace_opt.tracing.graph` for the rules it implements."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import networkx as nx

from memtrace_opt.tracing._content import ContentIndex, strings_in
from memtrace_opt.tracing.events import OpEvent, StoreRecord
from memtrace_opt.tracing.ids import answer_node, mem_id, question_node, turn_id

CONTENT = "content"  # the `via` of an edge found by matching text (see `_content.py`)

_MIN_MATCH_CHARS = 8
_REF_KEYS = ("$mem", "$turn", "$question")
_VTYPES = {
    "facts": "fact",
    "fact": "fact",
    "query": "query",
    "queries": "query",
    "summary": "summary",
    "summaries": "summary",
    "episodes": "episode",
    "episode": "episode",
    "context": "context",
    "answer": "answer",
}


def _key(value: Any) -> Any:
    """A hashable stand-in for a value worth matching (None for values never matched): a string itself, a
    list of strings as a tuple, any other ref-free value as its canonical JSON."""
    cls = type(value)
    if cls is str:
        return value if len(value) >= _MIN_MATCH_CHARS else None
    if cls is list:
        if not value:
            return None
        first = value[0]
        if type(first) is dict and ("$mem" in first or "$turn" in first or "$question" in first):
            return None  # lists of units (turns, questions) link through their nodes (see `by_unit`)
        flat = []
        for item in value:
            kind = type(item)
            if kind is str:
                flat.append(item)
                continue
            if kind is dict and ("$mem" in item or "$turn" in item or "$question" in item):
                return None
            frozen = _flat(item)
            if frozen is None:
                return ("json", json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                                           default=str))
            flat.append(frozen)
        return tuple(flat)
    if cls is dict:
        if not value or _REF_KEYS[0] in value or _REF_KEYS[1] in value or _REF_KEYS[2] in value:
            return None
        flat = _flat(value)
        if flat is not None:
            return flat
        return ("json", json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str))
    return None


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _flat(value: Any) -> Any:
    """A scalar, or a dict of scalars as a sorted item tuple (tagged); None for anything deeper."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return value
    if kind is dict:
        for item in value.values():
            if type(item) not in _SCALAR_TYPES:
                return None
        return ("dict", *sorted(value.items()))
    return None


def _refs(value: Any, out: list[tuple[str, Any]]) -> None:
    """(node id, the ref dict) for every ref inside a JSON value, in order."""
    kind = type(value)
    if kind is dict:
        ref = value.get("$mem") or value.get("$turn") or value.get("$question")
        if ref is not None:
            out.append((ref, value))
            return
        items: Iterable[Any] = value.values()
    elif kind is list:
        items = value
    else:
        return
    for item in items:
        kind = type(item)
        if kind is dict:
            ref = item.get("$mem") or item.get("$turn") or item.get("$question")
            if ref is not None:
                out.append((ref, item))
            else:
                _refs(item, out)
        elif kind is list:
            _refs(item, out)


class Builder:
    """Collects nodes and edges in plain ordered dicts; `graph()` hands them to networkx in one go."""

    def __init__(self, *, content: bool = True) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: dict[tuple[str, str, str], str | None] = {}  # (u, v, role) -> via (None: a typed edge)
        self.whole: dict[Any, str] = {}  # value key -> var node (latest producer)
        self.element: dict[Any, str] = {}  # list element key -> var node (latest producer)
        self.by_unit: dict[str, str] = {}  # mem node -> the latest var that passed it on (a retrieved list)
        self.var_seq: dict[str, int] = {}  # var node -> seq of the op that produced it
        self.ancestors: frozenset[int] = frozenset()  # seqs of the ops enclosing the op being linked
        self.content = content
        self.turn_texts = ContentIndex()  # turn node -> its text, grouped by session
        self.unit_texts = ContentIndex()  # live unit version -> its text
        self.unit_seq: dict[str, int] = {}  # unit version -> seq of the op that wrote it
        self.var_texts = ContentIndex()  # "var#i" -> the text of a var (or of its i-th element)

    def graph(self, attrs: dict[str, Any]) -> nx.MultiDiGraph:
        G = nx.MultiDiGraph()
        G.graph.update(attrs)
        if not _fast_fill(G, self.nodes, self.edges):
            G.add_nodes_from(self.nodes.items())
            G.add_edges_from((u, v, role, _edge_data(role, via)) for (u, v, role), via in self.edges.items())
        return G

    # nodes -------------------------------------------------------------------------------------------
    def mem(self, unit: dict[str, Any]) -> str:
        node = mem_id(unit["unit_id"], int(unit["version"]))
        if node not in self.nodes:
            self.nodes[node] = {
                "kind": "var",
                "vtype": "memory",
                "value": unit.get("text"),
                "unit_id": unit["unit_id"],
                "version": int(unit["version"]),
                "deleted": bool(unit.get("deleted", False)),
                "unit_kind": unit.get("kind", "memory"),
                "timestamp": unit.get("timestamp"),
                "source_turns": list(unit.get("source_turns") or []),
                "metadata": unit.get("metadata") or {},
            }
        return node

    def ref_node(self, ref: str, payload: Any) -> str | None:
        if ref in self.nodes:
            return ref
        if not isinstance(payload, dict):
            return None
        if ref.startswith("mem:") and "unit_id" in payload:
            return self.mem(payload)
        if ref.startswith("turn:") and "dia_id" in payload:
            self.turn(payload)
            return ref
        if ref.startswith("q:") and "question_id" in payload:
            self.question(payload)
            return ref
        return None

    def turn(self, data: dict[str, Any]) -> None:
        node = turn_id(str(data["dia_id"]))
        if self.content:
            self.turn_texts.add(node, data.get("text"), data.get("session_index"))
        self.nodes[node] = {
            "kind": "var",
            "vtype": "turn",
            "value": data.get("text"),
            "dia_id": str(data["dia_id"]),
            "speaker": data.get("speaker"),
            "session_index": data.get("session_index"),
            "timestamp": data.get("timestamp"),
            "image_caption": data.get("image_caption"),
        }

    def question(self, data: dict[str, Any]) -> None:
        qid = str(data["question_id"])
        self.nodes[question_node(qid)] = {
            "kind": "var",
            "vtype": "question",
            "value": data.get("question"),
            "question_id": qid,
            "gold": data.get("answer"),
            "evidence": list(data.get("evidence") or []),
            "category": data.get("category"),
            "question_date": data.get("question_date"),
        }

    def answer(self, question_id: str, value: Any) -> str:
        node = answer_node(question_id)
        found = self.nodes.get(node)
        if found is None:
            self.nodes[node] = {"kind": "var", "vtype": "answer", "value": value, "question_id": question_id}
        else:
            found["value"] = value
        return node

    # ops ---------------------------------------------------------------------------------------------
    def op(
        self,
        event: OpEvent,
        node: str,
        parent: str | None,
        lm_calls: list[dict[str, Any]],
        store: list[StoreRecord],
        own_writes: set[str],
        answers_for: str | None,
        ancestors: frozenset[int] = frozenset(),
    ) -> None:
        """One op call: its node, its input edges (refs, values, content), its store records' edges and its
        output vars (rules 1-6 of `memtrace_opt.tracing.graph`)."""
        self.ancestors = ancestors
        self.nodes[node] = _op_attrs(event, parent, lm_calls)
        inputs = event.inputs or {}
        refs: list[tuple[str, Any]] = []
        _refs(inputs, refs)
        self._link_refs(refs, node)
        linked = self._link_values(inputs, node) if self.whole else _NOTHING
        if self.content and (self.turn_texts or self.unit_texts or self.var_texts):
            fed = self._link_content(event, refs, linked, node, bool(store), own_writes)
            if not fed and self.var_texts and not linked and not _reads(refs, store):
                self._link_var_texts(inputs, node)  # nothing else feeds it: a value it reworked (joined, formatted)
        self._link_store(store, node)
        for name, value in (event.outputs or {}).items():
            if name == "error":
                continue
            if name == "answer" and answers_for is not None:
                self.edges[(node, self.answer(answers_for, value), "output")] = None
                continue
            self._output(node, event.seq, name, value, own_writes)
        if self.content:
            self._index_writes(store, event.seq)

    def _link_refs(self, refs: list[tuple[str, Any]], node: str) -> None:
        """Rule 1 and the unit half of rule 5: each ref's node -> op, and the retrieved var a unit came from."""
        edges, nodes, by_unit = self.edges, self.nodes, self.by_unit
        for ref, payload in refs:
            source = ref if ref in nodes else self.ref_node(ref, payload)
            if source is not None:
                edges[(source, node, "input")] = None
            var = by_unit.get(ref)  # a unit handed on from an earlier retrieved list, even reordered or cut
            if var is not None:
                self._consume(var, node)

    def _link_store(self, store: list[StoreRecord], node: str) -> None:
        """Rule 2: a read is unit -> op; a write is op -> the new version, from the previous one if any."""
        edges = self.edges
        for record in store:
            unit = self.mem(record.unit)
            if record.action == "read":
                edges[(unit, node, "input")] = None
                continue
            if record.previous is not None:
                edges[(self.mem(record.previous), node, "input")] = None
            edges[(node, unit, "output")] = None

    def _output(self, node: str, seq: int, name: str, value: Any, own_writes: set[str]) -> None:
        """Rules 3 and 4 for one output field: units it returns but the op did not write are reads; the field
        becomes `var:{seq}:{name}` unless it holds nothing but the op's own writes."""
        edges, nodes = self.edges, self.nodes
        found: list[tuple[str, Any]] = []
        if type(value) is dict or type(value) is list:
            _refs(value, found)
        mems = [r for r in found if r[0].startswith("mem:")] if found else found
        for ref, payload in mems:  # units the op returned but did not write: it read them
            if ref not in own_writes:
                source = ref if ref in nodes else self.ref_node(ref, payload)
                if source is not None:
                    edges[(source, node, "input")] = None
        if mems and len(mems) == len(found) and _only_units(value) and all(r in own_writes for r, _ in mems):
            return  # nothing but the op's own writes: the unit versions are its outputs already
        var = f"var:{seq}:{name}"
        vtype = "retrieved" if mems else _VTYPES.get(name, name)
        nodes[var] = {"kind": "var", "vtype": vtype, "value": value, "name": name}
        edges[(node, var, "output")] = None
        self.var_seq[var] = seq
        self._index(value, var)
        if vtype == "retrieved":
            for ref, _ in mems:
                self.by_unit[ref] = var

    def _link_content(self, event: OpEvent, refs: list[tuple[str, Any]], linked: set[int], node: str,
                      touches_store: bool, own_writes: set[str]) -> bool:
        """Content lineage (rule 6), only where the typed refs say nothing: turns whose text an input string
        holds, for an op with no turn among its inputs; units whose text it holds, for an op with no unit among
        its inputs and no store event; units whose text an output string copies, for such an op that took no
        turn either (it read them). Input values already linked to an earlier var by value are not searched
        (their content is traced through that var). Edges are marked `via: content`; a typed edge of the same
        pair wins. True when it linked anything."""
        edges, turns, units = self.edges, self.turn_texts, self.unit_texts
        typed_turns = any(ref.startswith("turn:") for ref, _ in refs)
        search_units = bool(units) and not touches_store and not any(ref.startswith("mem:") for ref, _ in refs)
        if typed_turns and not search_units:
            return False
        found_turn = typed_turns
        found = False
        for text in _unlinked_strings(event.inputs or {}, linked):
            if turns and not typed_turns:
                for turn in turns.find(text):
                    edges.setdefault((turn, node, "input"), CONTENT)
                    found_turn = found = True
            if search_units:
                found = self._link_units(units.find(text), node, own_writes) or found
        if search_units and not found_turn:
            outputs = event.outputs or {}
            if not any(ref.startswith("mem:") for ref in refs_in_values(outputs)):
                for name, value in outputs.items():
                    if name != "error":
                        for text in strings_in(value):
                            found = self._link_units(units.find(text), node, own_writes) or found
        return found

    def _link_var_texts(self, inputs: dict[str, Any], node: str) -> None:
        """An op nothing else feeds: the earlier vars whose strings (a whole string, or one element of a list)
        its input strings hold, e.g. a note joined from the facts an LM op returned. Marked `via: content`."""
        for text in _unlinked_strings(inputs, _NOTHING):
            for key in self.var_texts.find(text):
                var = key.split("#", 1)[0]
                if self.var_seq[var] not in self.ancestors:
                    self.edges.setdefault((var, node, "input"), CONTENT)

    def _link_units(self, found: tuple[str, ...], node: str, own_writes: set[str]) -> bool:
        linked = False
        for unit in found:
            # never the op's own writes, nor a unit an enclosing op wrote (it may have been written after)
            if unit not in own_writes and self.unit_seq.get(unit) not in self.ancestors:
                self.edges.setdefault((unit, node, "input"), CONTENT)
                linked = True
        return linked

    def _index_writes(self, store: list[StoreRecord], seq: int) -> None:
        """After an op is linked: the unit versions it wrote become findable, the versions they replace not."""
        for record in store:
            if record.action == "read":
                continue
            if record.previous is not None:
                self.unit_texts.remove(mem_id(record.previous["unit_id"], int(record.previous["version"])))
            node = mem_id(record.unit["unit_id"], int(record.unit["version"]))
            self.unit_seq[node] = seq
            if record.action != "delete" and not record.unit.get("deleted"):
                self.unit_texts.add(node, record.unit.get("text"))

    def _index(self, value: Any, var: str) -> None:
        if self.content:
            if type(value) is str:
                self.var_texts.add(f"{var}#", value)
            elif type(value) is list:
                for i, item in enumerate(value):
                    if type(item) is str:
                        self.var_texts.add(f"{var}#{i}", item)
        key = _key(value)
        if key is None:
            return
        self.whole[key] = var
        if type(value) is list:
            element = self.element
            for item in value:
                item_key = _key(item)
                if item_key is not None:
                    element[item_key] = var

    def _link_values(self, inputs: dict[str, Any], node: str) -> set[int]:
        """Value flow (rule 5); returns the ids of the input values (or list items) it linked."""
        whole, element = self.whole, self.element
        linked: set[int] = set()
        for value in inputs.values():
            key = _key(value)
            if key is None:
                continue
            var = whole.get(key) or element.get(key)
            if var is not None:
                self._consume(var, node)
                linked.add(id(value))
            elif type(value) is list:
                for item in value:
                    item_key = _key(item)
                    if item_key is not None:
                        var = whole.get(item_key) or element.get(item_key)
                        if var is not None:
                            self._consume(var, node)
                            linked.add(id(item))
        return linked

    def _consume(self, var: str, node: str) -> None:
        # a var of an enclosing op is produced after its nested ops end: linking it would make a cycle
        if self.var_seq[var] not in self.ancestors:
            self.edges[(var, node, "input")] = None


_NOTHING: set[int] = set()


def _reads(refs: list[tuple[str, Any]], store: list[StoreRecord]) -> bool:
    """Whether an op has an input from memory or the conversation (a ref other than the question, a read)."""
    return any(not ref.startswith("q:") for ref, _ in refs) or any(
        r.action == "read" or r.previous is not None for r in store)


def _unlinked_strings(inputs: dict[str, Any], linked: set[int]) -> Iterator[str]:
    """The strings of the inputs (see `strings_in`), leaving out values (and list items) in `linked`."""
    for value in inputs.values():
        if id(value) in linked:
            continue
        if type(value) is list and linked:
            for item in value:
                if id(item) not in linked:
                    yield from strings_in(item)
        else:
            yield from strings_in(value)


def refs_in_values(value: Any) -> Iterator[str]:
    found: list[tuple[str, Any]] = []
    _refs(value, found)
    return (ref for ref, _ in found)


def _edge_data(role: str, via: str | None) -> dict[str, Any]:
    return {"role": role} if via is None else {"role": role, "via": via}


def _fast_fill(G: nx.MultiDiGraph, nodes: dict[str, dict[str, Any]], edges: dict[tuple[str, str, str], str | None]) -> bool:
    """Fills an empty MultiDiGraph through its documented adjacency dicts (`_node`, `_succ`, `_pred`: node ->
    neighbour -> key -> edge data, the key dict shared by both directions), in the order `add_node` and
    `add_edge` would give, about ten times faster than `add_edges_from`. False (nothing done) if this
    networkx keeps its graph some other way; the caller then uses the public API."""
    node_map, succ, pred = getattr(G, "_node", None), getattr(G, "_succ", None), getattr(G, "_pred", None)
    if type(node_map) is not dict or type(succ) is not dict or type(pred) is not dict or G.number_of_nodes():
        return False
    for node, data in nodes.items():
        node_map[node] = data
        succ[node] = {}
        pred[node] = {}
    for (u, v, role), via in edges.items():
        if u not in node_map:
            node_map[u], succ[u], pred[u] = {}, {}, {}
        if v not in node_map:
            node_map[v], succ[v], pred[v] = {}, {}, {}
        keys = succ[u].get(v)
        if keys is None:
            keys = succ[u][v] = pred[v][u] = {}
        keys[role] = {"role": role} if via is None else {"role": role, "via": via}
    return True


def _only_units(value: Any) -> bool:
    """A unit ref, or a non-empty list of unit refs."""
    if type(value) is dict:
        return "$mem" in value
    return type(value) is list and bool(value) and all(type(v) is dict and "$mem" in v for v in value)


def _op_attrs(event: OpEvent, parent: str | None, lm_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An op node's attributes (docs/design.md)."""
    return {
        "kind": "op",
        "op": event.op,
        "predictor": event.predictor,
        "seq": event.seq,
        "started_at": event.started_at,
        "ended_at": event.ended_at,
        "inputs": event.inputs,
        "outputs": event.outputs,
        "instructions": event.instructions,
        "lm_calls": lm_calls,
        "error": event.error,
        "parent": parent,
        "replayed": event.replayed,
        "content_key": event.content_key,
        "writes_store": event.writes_store,
        "role": event.role,
    }
