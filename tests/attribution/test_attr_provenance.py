"""Provenance, not coincidence: information reaches an op only through parts that descend from an evidence turn;
a fact written with a pronoun or a relative date counts as held by the call that wrote it."""

from __future__ import annotations

from attr_graphs import (
    EVIDENCE,
    GOLD,
    QID,
    QUESTION,
    SESSION1,
    SESSION2,
    GraphBuilder,
    mem_list,
    text_of,
    turns,
)

from memtrace_opt.attribution import AttributionConfig, FailedCase, GraphView, NeededInfo, get_attributor
from memtrace_opt.attribution.lineage import case_flow

CONFIG = AttributionConfig(embedder="hash")
# session 2's chunk names Alice and the answer's word, about something else: a coincidental holder
COINCIDENCE = "Alice: My aunt bakes a biscuit for every guest.\nBob: My violin teacher says I am improving."


def case_for(graph, question: str = QUESTION, gold: str = GOLD) -> FailedCase:
    return FailedCase(QID, {"question_id": QID, "question": question, "answer": gold}, gold, "Max", EVIDENCE,
                      "test", "s1", graph=graph)


def coincidental_rag():
    """RAG whose retrieval returns only session 2's chunk: it holds "Alice" and "biscuit" but not the fact."""
    b = GraphBuilder("rag")
    _, c1 = b.op("rag.chunk", turns(SESSION1), {"chunk": text_of(SESSION1)})
    b.op("rag.index_chunk", [c1["chunk"]], mems=[("chunk-1", 1, text_of(SESSION1), False)])
    _, c2 = b.op("rag.chunk", turns(SESSION2), {"chunk": COINCIDENCE})
    _, m2 = b.op("rag.index_chunk", [c2["chunk"]], mems=[("chunk-2", 1, COINCIDENCE, False)])
    q = b.question()
    retrieve, r = b.op("rag.retrieve", [q, m2["chunk-2"]], {"units": mem_list(b.graph, [m2["chunk-2"]])})
    answer, _ = b.op("rag.answer", [q, r["units"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    return b.graph, retrieve, answer


def test_a_coincidental_segment_does_not_reach_the_answer_op() -> None:
    graph, retrieve, answer = coincidental_rag()
    view = GraphView(graph)
    assert NeededInfo(QUESTION, GOLD).holds(view.input_parts(answer))  # the words are there, by coincidence
    flow = case_flow(view, case_for(graph), CONFIG)
    assert not flow.reached_answer and not flow.reached(view, answer)
    assert view.lineage("mem:chunk-2@1") == frozenset(turns(SESSION2))  # walked back through the chunk op
    verdict = get_attributor("lineage", CONFIG).attribute(case_for(graph), graph)
    assert (verdict.op_id, verdict.error_type) == (retrieve, "RetrievalError"), verdict.reason


def test_units_rendered_as_plain_strings_keep_each_units_own_lineage() -> None:
    """A retrieve op that reads both chunks and passes them on as plain strings: the list as a whole descends
    from the evidence turn (chunk 1 was read), but the string that holds the answer's words is chunk 2's."""
    b = GraphBuilder("rag")
    lost = text_of(SESSION1, drop="D1:3")  # the evidence session, its fact left out
    _, c1 = b.op("rag.chunk", turns(SESSION1), {"chunk": lost})
    _, m1 = b.op("rag.index_chunk", [c1["chunk"]], mems=[("chunk-1", 1, lost, False)])
    _, c2 = b.op("rag.chunk", turns(SESSION2), {"chunk": COINCIDENCE})
    _, m2 = b.op("rag.index_chunk", [c2["chunk"]], mems=[("chunk-2", 1, COINCIDENCE, False)])
    q = b.question()
    rendered = [f"[1 May]\n- {text}" for text in (lost, COINCIDENCE)]
    _, r = b.op("rag.retrieve", [q, m1["chunk-1"], m2["chunk-2"]], {"notes": rendered})
    answer, _ = b.op("rag.answer", [q, r["notes"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    view = GraphView(b.graph)
    assert "turn:D1:3" in view.lineage(r["notes"])
    assert NeededInfo(QUESTION, GOLD).holds(view.input_parts(answer))
    flow = case_flow(view, case_for(b.graph), CONFIG)
    assert not flow.reached_answer and not flow.reached(view, answer)


def test_a_unit_from_the_evidence_turn_still_reaches_the_answer_op() -> None:
    b = GraphBuilder("rag")
    _, c1 = b.op("rag.chunk", turns(SESSION1), {"chunk": text_of(SESSION1)})
    _, m1 = b.op("rag.index_chunk", [c1["chunk"]], mems=[("chunk-1", 1, text_of(SESSION1), False)])
    q = b.question()
    _, r = b.op("rag.retrieve", [q, m1["chunk-1"]], {"units": mem_list(b.graph, [m1["chunk-1"]])})
    answer, _ = b.op("rag.answer", [q, r["units"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    view = GraphView(b.graph)
    flow = case_flow(view, case_for(b.graph), CONFIG)
    assert flow.reached_answer and flow.reached(view, answer)


PRONOUN_FACT = "She named the new beagle Biscuit"


def mem0_pronoun_skipped(decision_keeps: bool = False):
    """Mem0: the extraction writes the puppy fact with a pronoun; the update decision leaves it out (or adds it)."""
    b = GraphBuilder("mem0")
    facts = ["Bob went hiking at Mount Tam with his sister", PRONOUN_FACT]
    extract, f = b.op("mem0.extract_facts", turns(SESSION1), {"facts": facts}, predictor="extract_facts.predict")
    _, s = b.op("mem0.search_similar", [f["facts"]], {"similar": [{"fact": x, "memories": []} for x in facts]})
    kept = facts if decision_keeps else facts[:1]
    decide, d = b.op("mem0.update_decision", [f["facts"], s["similar"]],
                     {"decisions": [{"event": "ADD", "text": x} for x in kept]}, predictor="update_decision.predict")
    _, m = b.op("mem0.apply", [d["decisions"]], mems=[(f"fact-{i + 1}", 1, x, False) for i, x in enumerate(kept)])
    q = b.question()
    retrieve, r = b.op("mem0.retrieve", [q, *m.values()], {"memories": mem_list(b.graph, list(m.values()))})
    b.op("mem0.answer", [q, r["memories"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    return b.graph, extract, decide


def test_a_pronoun_written_fact_dropped_by_the_update_is_blamed_on_the_update() -> None:
    graph, extract, decide = mem0_pronoun_skipped()
    assert not NeededInfo(QUESTION, GOLD).holds(PRONOUN_FACT)  # the strict test wants Alice named
    verdict = get_attributor("lineage", CONFIG).attribute(case_for(graph), graph)
    assert (verdict.op_id, verdict.error_type) == (decide, "UpdateError"), verdict.reason


def test_a_pronoun_written_fact_kept_in_memory_is_blamed_on_the_call_that_wrote_it() -> None:
    graph, extract, _ = mem0_pronoun_skipped(decision_keeps=True)
    verdict = get_attributor("lineage", CONFIG).attribute(case_for(graph), graph)
    assert (verdict.op_id, verdict.error_type) == (extract, "ExtractionError"), verdict.reason
    assert "pronoun" in verdict.reason


def test_a_relative_date_dropped_by_the_update_is_blamed_on_the_update() -> None:
    b = GraphBuilder("mem0")
    facts = ["Alice adopted a beagle puppy two days ago"]
    b.op("mem0.extract_facts", turns(SESSION1), {"facts": facts}, predictor="extract_facts.predict")
    _, s = b.op("mem0.search_similar", [f"var:{b.seq - 1}:facts"], {"similar": [{"fact": facts[0], "memories": []}]})
    decide, _ = b.op("mem0.update_decision", [f"var:{b.seq - 2}:facts", s["similar"]], {"decisions": []},
                     predictor="update_decision.predict")
    q = b.question()
    _, r = b.op("mem0.retrieve", [q], {"memories": []})
    b.op("mem0.answer", [q, r["memories"]], {"answer": "Max"}, predictor="answer.predict", answer_of=QID)
    case = case_for(b.graph, "When did Alice adopt her beagle puppy?", "12 April 2021")
    verdict = get_attributor("lineage", CONFIG).attribute(case, b.graph)
    assert (verdict.op_id, verdict.error_type) == (decide, "UpdateError"), verdict.reason


def test_written_needs_a_pronoun_or_a_relative_date_and_the_answer_words_less_the_people() -> None:
    needed = NeededInfo(QUESTION, GOLD, people=("Alice", "Bob"))
    assert needed.written(PRONOUN_FACT)
    assert not needed.written("A beagle puppy named Biscuit")  # no pronoun: the strict test decides
    assert not needed.written("She adopted a beagle puppy")  # the answer's word is missing
    dated = NeededInfo("When did Alice's father retire?", "25 January 2023", people=("Alice",))
    assert dated.written("Alice's father retired two days ago")
    assert not dated.written("Alice moved two days ago")  # a relative date, but not of what was asked
    counted = NeededInfo("How long did the move take?", "5 hours")
    assert not counted.written("Last weekend the drive took around 2 hours")  # a relative date excuses no count
