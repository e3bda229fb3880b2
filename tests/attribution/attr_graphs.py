"""Hand-built evolution graphs (docs/design.md schema) for each system shape, with a known root cause.

The story: Alice adopted a beagle named Biscuit (turn D1:3); the question asks the puppy's name. Each
builder takes a `fault` and returns (graph, expected op id, expected error type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

QID = "s1:q1"
QUESTION = "What is the name of Alice's puppy?"
GOLD = "Biscuit"
EVIDENCE = ("D1:3",)

TURNS = {
    "D1:1": ("Alice", "Hi Bob! How was your weekend?"),
    "D1:2": ("Bob", "Great, I went hiking at Mount Tam with my sister."),
    "D1:3": ("Alice", "Nice. I finally adopted a puppy, a beagle named Biscuit!"),
    "D1:4": ("Bob", "Congrats! I started learning the violin last month."),
    "D2:1": ("Alice", "My new dog chewed my shoes today, haha."),
    "D2:2": ("Bob", "My violin teacher says I am improving."),
}
SESSION1 = ["D1:1", "D1:2", "D1:3", "D1:4"]
SESSION2 = ["D2:1", "D2:2"]


def unit_value(unit_id: str, version: int, text: str, *, deleted: bool = False, sources=()) -> dict[str, Any]:
    kind = unit_id.rsplit("-", 1)[0]
    return {
        "$mem": f"mem:{unit_id}@{version}", "unit_id": unit_id, "version": version, "text": text, "kind": kind,
        "timestamp": None, "source_turns": list(sources), "deleted": deleted, "metadata": {},
    }


@dataclass
class GraphBuilder:
    """Builds a graph op by op, in execution order."""

    system: str
    graph: nx.MultiDiGraph = field(init=False)
    seq: int = 0

    def __post_init__(self) -> None:
        self.graph = nx.MultiDiGraph(
            schema_version=1, system=self.system, dataset="test", sample_id="s1", models={}, instructions={}
        )
        for dia_id, (speaker, text) in TURNS.items():
            value = {"$turn": f"turn:{dia_id}", "dia_id": dia_id, "speaker": speaker, "text": text,
                     "session_index": int(dia_id[1]), "timestamp": None, "image_caption": None}
            self.graph.add_node(f"turn:{dia_id}", kind="var", vtype="turn", value=value)

    def question(self, qid: str = QID, text: str = QUESTION) -> str:
        node = f"q:{qid}"
        value = {"$question": node, "question_id": qid, "question": text, "answer": GOLD, "category": "single-hop"}
        self.graph.add_node(node, kind="var", vtype="question", value=value)
        return node

    def op(
        self,
        name: str,
        inputs: list[str],
        outputs: dict[str, Any] | None = None,
        *,
        mems: list[tuple[str, int, str, bool]] = (),  # type: ignore[assignment]
        predictor: str | None = None,
        answer_of: str | None = None,
    ) -> tuple[str, dict[str, str]]:
        """Add op:{seq}; `outputs` become var nodes, `mems` (unit_id, version, text, deleted) memory versions
        whose source turns are the op's turn inputs (or those of its memory inputs)."""
        op = f"op:{self.seq}"
        recorded_in = {f"in{i}": self.graph.nodes[n].get("value") for i, n in enumerate(inputs)}
        recorded_out = dict(outputs or {})
        self.graph.add_node(
            op, kind="op", op=name, predictor=predictor, seq=self.seq, inputs=recorded_in, outputs=recorded_out,
            instructions=f"Do the {name} job." if predictor else None, lm_calls=[], error=None, parent=None,
            started_at=float(self.seq), ended_at=float(self.seq),
        )
        for node in inputs:
            self.graph.add_edge(node, op, role="input")
        made: dict[str, str] = {}
        for key, value in (outputs or {}).items():
            node = f"var:{self.seq}:{key}"
            self.graph.add_node(node, kind="var", vtype=key, value=value)
            self.graph.add_edge(op, node, role="output")
            made[key] = node
        sources = [n[5:] for n in inputs if n.startswith("turn:")]
        for unit_id, version, text, deleted in mems:
            node = f"mem:{unit_id}@{version}"
            value = unit_value(unit_id, version, text, deleted=deleted, sources=sources)
            self.graph.add_node(node, kind="var", vtype="memory", value=value, unit_id=unit_id, version=version,
                                deleted=deleted)
            self.graph.add_edge(op, node, role="output")
            made[unit_id] = node
        if answer_of is not None:
            node = f"ans:{answer_of}"
            self.graph.add_node(node, kind="var", vtype="answer", value=recorded_out.get("answer", ""))
            self.graph.add_edge(op, node, role="output")
            made["answer"] = node
        self.seq += 1
        return op, made


def mem_list(graph: nx.MultiDiGraph, nodes: list[str]) -> list[dict[str, Any]]:
    return [graph.nodes[n]["value"] for n in nodes]


def turns(ids: list[str]) -> list[str]:
    return [f"turn:{i}" for i in ids]


def text_of(ids: list[str], drop: str | None = None) -> str:
    return "\n".join(f"{TURNS[i][0]}: {TURNS[i][1]}" for i in ids if i != drop)


@dataclass(frozen=True)
class Built:
    graph: nx.MultiDiGraph
    op_id: str
    error_type: str


# --- RAG: chunk -> index_chunk; retrieve -> answer ------------------------------------------------------
def rag(fault: str) -> Built:
    """fault: extraction (the chunk drops D1:3), retrieval, response."""
    b = GraphBuilder("rag")
    chunk_op, out = b.op("rag.chunk", turns(SESSION1),
                         {"chunk": text_of(SESSION1, drop="D1:3" if fault == "extraction" else None)})
    _, m1 = b.op("rag.index_chunk", [out["chunk"]], mems=[("chunk-1", 1, b.graph.nodes[out["chunk"]]["value"], False)])
    _, c2 = b.op("rag.chunk", turns(SESSION2), {"chunk": text_of(SESSION2)})
    _, m2 = b.op("rag.index_chunk", [c2["chunk"]], mems=[("chunk-2", 1, text_of(SESSION2), False)])
    q = b.question()
    returned = [m2["chunk-2"]] if fault == "retrieval" else [m1["chunk-1"], m2["chunk-2"]]
    retrieve, r = b.op("rag.retrieve", [q, *returned], {"units": mem_list(b.graph, returned)})
    answer, _ = b.op("rag.answer", [q, r["units"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    expected = {"extraction": (chunk_op, "ExtractionError"), "retrieval": (retrieve, "RetrievalError"),
                "response": (answer, "ResponseError")}[fault]
    return Built(b.graph, *expected)


# --- Mem0: extract_facts -> search_similar -> update_decision -> apply; retrieve -> answer ----------------
FACT_DOG = "Alice adopted a beagle puppy named Biscuit"


def mem0(fault: str) -> Built:
    """fault: extraction, skipped (the decision leaves the extracted fact out), update, deletion, retrieval,
    response."""
    b = GraphBuilder("mem0")
    dog = "Alice adopted a puppy" if fault == "extraction" else FACT_DOG
    facts = ["Bob went hiking at Mount Tam with his sister", dog, "Bob is learning the violin"]
    kept = [x for x in facts if not (fault == "skipped" and x == dog)]
    extract, f = b.op("mem0.extract_facts", turns(SESSION1), {"facts": facts}, predictor="extract_facts.predict")
    # the search passes each fact on with the (no) memories like it
    _, s = b.op("mem0.search_similar", [f["facts"]], {"similar": [{"fact": x, "memories": []} for x in facts]})
    first, d = b.op("mem0.update_decision", [f["facts"], s["similar"]],
                    {"decisions": [{"event": "ADD", "text": x} for x in kept]}, predictor="update_decision.predict")
    _, m = b.op("mem0.apply", [d["decisions"]],
                mems=[(f"fact-{i + 1}", 1, x, False) for i, x in enumerate(facts) if x in kept])
    facts2 = ["Alice's dog chewed her shoes", "Bob's violin teacher says he is improving"]
    _, f2 = b.op("mem0.extract_facts", turns(SESSION2), {"facts": facts2}, predictor="extract_facts.predict")
    similar = [m["fact-2"]] if "fact-2" in m else []
    _, s2 = b.op("mem0.search_similar", [f2["facts"], *similar], {"similar": mem_list(b.graph, similar)})
    decisions: list[dict[str, Any]] = [{"event": "ADD", "text": x} for x in facts2]
    if fault == "update":
        decisions[0] = {"event": "UPDATE", "id": "fact-2", "text": "Alice has a dog that chews shoes"}
    if fault == "deletion":
        decisions.insert(0, {"event": "DELETE", "id": "fact-2", "text": dog})
    decide, d2 = b.op("mem0.update_decision", [f2["facts"], s2["similar"]], {"decisions": decisions},
                      predictor="update_decision.predict")
    mems: list[tuple[str, int, str, bool]] = [("fact-4", 1, facts2[1], False)]
    apply_inputs = [d2["decisions"]]
    if fault == "update":
        mems.append(("fact-2", 2, "Alice has a dog that chews shoes", False))
        apply_inputs.append(m["fact-2"])
    elif fault == "deletion":
        mems += [("fact-2", 2, dog, True), ("fact-5", 1, facts2[0], False)]
        apply_inputs.append(m["fact-2"])
    else:
        mems.append(("fact-5", 1, facts2[0], False))
    _, m2 = b.op("mem0.apply", apply_inputs, mems=mems)
    q = b.question()
    if fault in ("retrieval", "update", "skipped"):
        returned = [m["fact-1"], m["fact-3"]]
    elif fault == "deletion":
        returned = [m["fact-1"], m2["fact-5"]]
    else:
        returned = [m["fact-2"], m["fact-1"]]
    retrieve, r = b.op("mem0.retrieve", [q, *returned], {"memories": mem_list(b.graph, returned)})
    answer, _ = b.op("mem0.answer", [q, r["memories"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    expected = {"extraction": (extract, "ExtractionError"), "skipped": (first, "UpdateError"), "update": (decide, "UpdateError"),
                "deletion": (decide, "DeletionError"), "retrieval": (retrieve, "RetrievalError"),
                "response": (answer, "ResponseError")}[fault]
    return Built(b.graph, *expected)


# --- Long context: ingest -> trim; retrieve (pass-through) -> answer -------------------------------------
def long_context(fault: str) -> Built:
    """fault: extraction (ingest garbles D1:3), deletion (trim drops it), response."""
    b = GraphBuilder("long_context")
    units = []
    for i, dia in enumerate(SESSION1 + SESSION2, start=1):
        text = "Alice: I finally adopted a puppy!" if (fault == "extraction" and dia == "D1:3") else text_of([dia])
        units.append((f"turn-{i}", 1, text, False))
    ingest, m = b.op("long_context.ingest", turns(SESSION1), mems=units[:4])
    _, m2 = b.op("long_context.ingest", turns(SESSION2), mems=units[4:])
    m.update(m2)
    dropped = ["turn-1", "turn-2", "turn-3"] if fault == "deletion" else ["turn-1"]
    trim, t = b.op("long_context.trim", [m[u] for u in dropped],
                   mems=[(u, 2, b.graph.nodes[m[u]]["value"]["text"], True) for u in dropped])
    live = [m[f"turn-{i}"] for i in range(1, 7) if f"turn-{i}" not in dropped]
    q = b.question()
    _, r = b.op("long_context.retrieve", [q, *live], {"context": mem_list(b.graph, live)})
    answer, _ = b.op("long_context.answer", [q, r["context"]], {"answer": "Max"}, predictor="answer.predict",
                     answer_of=QID)
    expected = {"extraction": (ingest, "ExtractionError"), "deletion": (trim, "DeletionError"),
                "response": (answer, "ResponseError")}[fault]
    return Built(b.graph, *expected)


# --- EverMemOS: boundary -> memcell -> episode/event log -> store; retrieve -> sufficiency -> merge -> answer
def evermemos(fault: str) -> Built:
    """fault: extraction (episode and event log lose the name), retrieval, merge (drops it), response."""
    b = GraphBuilder("evermemos")
    _, bd = b.op("evermemos.detect_boundary", turns(SESSION1), {"boundary": {"should_end": True}},
                 predictor="detect_boundary.predict")
    _, cell = b.op("evermemos.finalize_memcell", turns(SESSION1), mems=[("memcell-1", 1, text_of(SESSION1), False)])
    lost = fault == "extraction"
    episode = ("Alice and Bob caught up. Bob hiked Mount Tam with his sister; Alice adopted a dog; Bob learns violin."
               if lost else "Alice and Bob caught up. Bob hiked Mount Tam; Alice adopted a beagle named Biscuit.")
    extract, e = b.op("evermemos.extract_episode", [cell["memcell-1"]], {"episode": episode},
                      predictor="extract_episode.predict")
    events = ["Bob hiked Mount Tam", "Alice adopted a dog" if lost else "Alice adopted Biscuit, a beagle"]
    _, ev = b.op("evermemos.extract_event_log", [cell["memcell-1"]], {"events": events},
                 predictor="extract_event_log.predict")
    _, se = b.op("evermemos.store_episode", [e["episode"]], mems=[("episode-1", 1, episode, False)])
    _, sv = b.op("evermemos.store_events", [ev["events"]],
                 mems=[(f"event-{i + 1}", 1, x, False) for i, x in enumerate(events)])
    _, cell2 = b.op("evermemos.finalize_memcell", turns(SESSION2), mems=[("memcell-2", 1, text_of(SESSION2), False)])
    _, e2 = b.op("evermemos.extract_episode", [cell2["memcell-2"]], {"episode": "Alice's dog chewed shoes."},
                 predictor="extract_episode.predict")
    _, se2 = b.op("evermemos.store_episode", [e2["episode"]], mems=[("episode-2", 1, "Alice's dog chewed shoes.", False)])
    q = b.question()
    returned = [se2["episode-2"], sv["event-1"]] if fault == "retrieval" else [se["episode-1"], se2["episode-2"]]
    retrieve, r = b.op("evermemos.retrieve", [q, *returned], {"hits": mem_list(b.graph, returned)})
    _, suff = b.op("evermemos.check_sufficiency", [q, r["hits"]], {"sufficient": True},
                   predictor="check_sufficiency.predict")
    kept = [se2["episode-2"]] if fault == "merge" else returned
    merge, mg = b.op("evermemos.merge", [r["hits"]], {"merged": mem_list(b.graph, kept)})
    answer, _ = b.op("evermemos.answer", [q, mg["merged"]], {"answer": "Max"}, predictor="answer.predict",
                     answer_of=QID)
    expected = {"extraction": (extract, "ExtractionError"), "retrieval": (retrieve, "RetrievalError"),
                "merge": (merge, "RetrievalError"), "response": (answer, "ResponseError")}[fault]
    return Built(b.graph, *expected)


SHAPES = {
    "rag": (rag, ("extraction", "retrieval", "response")),
    "mem0": (mem0, ("extraction", "skipped", "update", "deletion", "retrieval", "response")),
    "long_context": (long_context, ("extraction", "deletion", "response")),
    "evermemos": (evermemos, ("extraction", "retrieval", "merge", "response")),
}
ALL_CASES = [(system, fault) for system, (_, faults) in SHAPES.items() for fault in faults]


def build(system: str, fault: str) -> Built:
    return SHAPES[system][0](fault)
