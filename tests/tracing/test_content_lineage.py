"""Content lineage: plain strings that hold a turn's or a unit's text are linked (`via: content`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memtrace_opt.attribution import AttributionConfig, attribute_run
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.tracing import (
    CONTENT,
    GRAPH_SCHEMA_VERSION,
    OpEvent,
    RunStart,
    StoreRecord,
    TurnEvent,
    build_graph,
    graph_from_json,
    graph_to_json,
    load_graph,
)

FAKE = ModelRoles(task=ModelSpec(model="fake"))
SCHEMA1_RUN = Path(__file__).parent / "data" / "run_schema1"


def _unit(uid: str, version: int, text: str, deleted: bool = False) -> dict:
    return {"unit_id": uid, "version": version, "text": text, "kind": "note", "timestamp": None,
            "source_turns": [], "deleted": deleted, "metadata": {}}


def _op(seq: int, name: str, inputs: dict, outputs: dict) -> OpEvent:
    return OpEvent(call_id=f"c{seq}", seq=seq, op=name, inputs=inputs, outputs=outputs)


TURNS = [
    TurnEvent("D1:1", "Ann", "I adopted a kitten called Pepper last week!", 1),
    TurnEvent("D1:2", "Bob", "Thanks so much for telling me that.", 1),
    TurnEvent("D2:1", "Bob", "Thanks so much for telling me that.", 2),
    TurnEvent("D2:2", "Ann", "My sister moved to Denver in May.", 2),
    TurnEvent("D2:3", "Ann", "Cool!", 2),
]


def _events() -> list:
    session2 = "Bob: thanks so MUCH for telling me that\nAnn:  My sister moved to Denver in May.\nAnn: Cool!"
    return [
        RunStart(system="notes", dataset="test", sample_id="s1"),
        *TURNS,
        _op(0, "notes.write", {"session": "Ann: I adopted a kitten called Pepper last week!"},
            {"note": "Ann adopted a kitten called Pepper."}),
        _op(1, "notes.store", {"note": "Ann adopted a kitten called Pepper."}, {"unit": None}),
        StoreRecord("c1", "add", _unit("note-1", 1, "Ann adopted a kitten called Pepper.")),
        _op(2, "notes.write", {"session": session2, "date": "2023-05-08"}, {"note": "Ann's sister moved to Denver."}),
        _op(3, "notes.retrieve", {"question": "What is the kitten's name?"},
            {"notes": ["[8 May 2023]\n- Ann adopted a kitten called Pepper."]}),
        _op(4, "notes.answer", {"context": "Notes:\n[8 May 2023]\n- Ann adopted a kitten called Pepper."},
            {"answer": "Pepper"}),
        _op(5, "notes.answer", {"notes": ["[8 May 2023]\n- Ann adopted a kitten called Pepper."]},
            {"answer": "Pepper"}),
    ]


def _content_edges(G) -> set[tuple[str, str]]:
    return {(u, v) for u, v, data in G.edges(data=True) if data.get("via") == CONTENT}


def test_strings_holding_turn_and_unit_texts_are_linked_via_content():
    G = build_graph(_events())
    assert G.graph["schema_version"] == GRAPH_SCHEMA_VERSION == 2
    edges = _content_edges(G)
    assert ("turn:D1:1", "op:0") in edges
    # case, spacing and punctuation aside; the repeated "Thanks so much" turn resolves to its own session;
    # "Cool!" is too short to match by chance
    assert {u for u, v in edges if v == "op:2"} == {"turn:D2:1", "turn:D2:2"}
    assert ("mem:note-1@1", "op:3") in edges  # an output that copies a unit's text: the op read it
    assert ("mem:note-1@1", "op:4") in edges  # an input string that holds it
    # a value an earlier op produced is traced through that op's var, not searched again
    assert G.has_edge("var:3:notes", "op:5") and not any(v == "op:5" for _, v in edges)
    assert all(G.edges[u, v, "input"]["role"] == "input" for u, v in edges)
    assert not any(v == "op:1" for _, v in edges)  # the store's note is its own write, linked by value


def test_content_lineage_can_be_left_out_and_typed_edges_win():
    assert not _content_edges(build_graph(_events(), content_lineage=False))
    typed_turn = {"$turn": "turn:D1:1", "dia_id": "D1:1", "speaker": "Ann", "text": TURNS[0].text, "session_index": 1}
    events = [*_events()[:6], _op(0, "notes.write", {"turns": [typed_turn], "session": "Ann: " + TURNS[0].text},
                                   {"note": "x"})]
    G = build_graph(events)
    assert G.edges["turn:D1:1", "op:0", "input"] == {"role": "input"}


def test_a_replaced_or_deleted_version_is_no_longer_matched():
    events = [
        RunStart(system="notes", dataset="test", sample_id="s1"),
        _op(0, "notes.store", {}, {}),
        StoreRecord("c0", "add", _unit("note-1", 1, "Ann adopted a kitten called Pepper.")),
        _op(1, "notes.update", {}, {}),
        StoreRecord("c1", "update", _unit("note-1", 2, "Ann adopted two kittens, Pepper and Salt."),
                    previous=_unit("note-1", 1, "Ann adopted a kitten called Pepper.")),
        _op(2, "notes.read", {"context": "Ann adopted a kitten called Pepper. Ann adopted two kittens, Pepper and Salt."},
            {}),
        _op(3, "notes.forget", {}, {}),
        StoreRecord("c3", "delete", _unit("note-1", 3, "Ann adopted two kittens, Pepper and Salt.", deleted=True),
                    previous=_unit("note-1", 2, "Ann adopted two kittens, Pepper and Salt.")),
        _op(4, "notes.read", {"context": "Ann adopted two kittens, Pepper and Salt."}, {}),
    ]
    edges = _content_edges(build_graph(events))
    assert {u for u, v in edges if v == "op:2"} == {"mem:note-1@2"}
    assert not any(v == "op:4" for _, v in edges)


def test_an_op_fed_only_a_reworked_value_is_linked_to_the_var_it_came_from():
    facts = ["Ann adopted a kitten called Pepper", "Ann's sister moved to Denver"]
    events = [
        RunStart(system="notes", dataset="test", sample_id="s1"),
        *TURNS,
        _op(0, "notes.write", {"session": "Ann: " + TURNS[0].text}, {"facts": facts}),
        _op(1, "notes.store", {"note": " ".join(facts) + "."}, {}),
        _op(2, "notes.other", {"question": "Where does the sister live now?"}, {}),
    ]
    G = build_graph(events)
    assert ("var:0:facts", "op:1") in _content_edges(G)
    assert not any(v == "op:2" for _, v in G.in_edges("op:2"))


def test_a_graph_with_content_edges_round_trips():
    G = build_graph(_events())
    text = graph_to_json(G)
    assert '"via":"content"' in text
    assert graph_to_json(graph_from_json(text)) == text


def _verdicts(run: Path) -> list[tuple]:
    result = attribute_run(run, "lineage", config=AttributionConfig(embedder="hash"))
    return [(":".join(v.case_id.split(":")[-2:]), v.error_type, v.op_id, v.op, v.predictor) for v in result.verdicts]


@pytest.fixture(scope="module")
def twin_verdicts(tmp_path_factory) -> dict[str, list[tuple]]:
    found = {}
    for name in ("StringNotes", "TypedNotes"):
        out = tmp_path_factory.mktemp("twins") / name
        run_system(RunRequest(system=f"notes_twins:{name}", data="sample", out=out, roles=FAKE, judge=False),
                   progress=False)
        found[name] = _verdicts(out)
    return found


def test_a_program_passing_strings_gets_the_verdicts_of_its_typed_twin(twin_verdicts):
    strings, typed = twin_verdicts["StringNotes"], twin_verdicts["TypedNotes"]
    assert len(strings) == len(typed) >= 8
    assert strings == typed
    extraction = [v for v in strings if v[1] == "ExtractionError"]
    assert extraction and all(v[3] == "notes.write" and v[4] == "write.predict" for v in extraction)


def test_a_run_directory_with_schema1_graphs_still_loads_and_attributes(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SCHEMA1_RUN, run)
    G = load_graph(run / "graphs" / "sample-1.json")
    assert G.graph["schema_version"] == 1 and not _content_edges(G)
    expected = [json.loads(line) for line in (run / "expected_verdicts.jsonl").read_text().splitlines()]
    got = attribute_run(run, "lineage", config=AttributionConfig(embedder="hash")).verdicts
    assert [(v.case_id, v.error_type, v.op_id, v.predictor) for v in got] == [
        (e["case_id"], e["error_type"], e["op_id"], e["predictor"]) for e in expected
    ]
