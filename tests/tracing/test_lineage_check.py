"""The end-of-run lineage warning: units and answers no turn reaches, named by the op at their root."""

from __future__ import annotations

import logging

import pytest

from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.report import load_run
from memtrace_opt.report._payload import build_payload
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.tracing import (
    AnswerEvent,
    OpEvent,
    QuestionEvent,
    RunStart,
    StoreRecord,
    TurnEvent,
    build_graph,
)
from memtrace_opt.tracing.lineage_check import describe_breaks, lineage_check

FAKE = ModelRoles(task=ModelSpec(model="fake"))


def _run(tmp_path, system: str, caplog) -> tuple[list[str], object]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memtrace_opt.runner"):
        summary = run_system(RunRequest(system=system, data="sample", out=tmp_path / system.replace(":", "_"),
                                        roles=FAKE, judge=False, program_settings={"embedder": "hash"}),
                             progress=False)
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("lineage:")], summary


def test_a_program_whose_op_hides_its_inputs_is_warned_once_per_op(tmp_path, caplog):
    lines, summary = _run(tmp_path, "notes_twins:HiddenNotes", caplog)
    assert len(lines) == 2, lines
    assert "3 memory units and 13 answers in 1 conversation have no path from any conversation turn" in lines[0]
    assert lines[1].startswith("lineage: notes.write took none of the conversation among its call arguments")
    assert "its 3 calls" in lines[1] and "turns=session.turns" in lines[1]
    # and the report's summary says the same
    payload = build_payload(load_run(summary.run_dir))
    assert payload["summary"]["lineage"] == lines


@pytest.mark.parametrize("system", ["long_context", "rag", "mem0", "evermemos", "notes_twins:TypedNotes",
                                    "notes_twins:StringNotes"])
def test_never_on_the_built_in_systems_nor_on_plain_strings(tmp_path, caplog, system):
    lines, summary = _run(tmp_path, system, caplog)
    assert lines == []
    report = build_payload(load_run(summary.run_dir))["summary"]
    assert report["lineage"] == []
    # the program passing strings is linked by content, and the report says so (the others are typed)
    assert (report["lineage_content"] is not None) == (system == "notes_twins:StringNotes")
    if report["lineage_content"]:
        assert report["lineage_content"].startswith("notes.write received the conversation as plain text")


def _events(session_text: str) -> list:
    return [
        RunStart(system="notes", dataset="test", sample_id="s1"),
        TurnEvent("D1:1", "Ann", "I adopted a kitten called Pepper last week at the shelter.", 1),
        OpEvent(call_id="c0", seq=0, op="notes.write", inputs={"session": session_text}, outputs={"note": "Ann has a kitten named Pepper"}),
        OpEvent(call_id="c1", seq=1, op="notes.store", inputs={"note": "Ann has a kitten named Pepper"}, outputs={}),
        StoreRecord("c1", "add", {"unit_id": "note-1", "version": 1, "text": "Ann has a kitten named Pepper", "kind": "note"}),
        QuestionEvent({"question_id": "q1", "question": "Which pet?", "answer": "Pepper"}),
        OpEvent(call_id="c2", seq=2, op="notes.retrieve", inputs={"question": "Which pet?"},
                outputs={"notes": ["the note"]}),
        OpEvent(call_id="c3", seq=3, op="notes.answer",
                inputs={"question": {"$question": "q:q1", "question_id": "q1"}, "notes": ["the note"]},
                outputs={"answer": "Pepper"}),
        AnswerEvent("q1", "Pepper", "c3"),
    ]


def test_text_that_no_longer_matches_a_turn_is_told_apart_from_no_text():
    cut = lineage_check(build_graph(_events("Ann: i adopted a kitten called pepper last week")))
    assert (cut.units, cut.answers) == (1, 1)
    by_op = {b.op: b for b in cut.breaks}
    assert by_op["notes.write"].untyped and by_op["notes.write"].units
    assert "matches no turn's text" in by_op["notes.write"].message()
    # the retrieve op returned strings that hold no unit's text: the answer's own break, with its own fix
    assert not by_op["notes.retrieve"].units and "state.store.read" in by_op["notes.retrieve"].message()
    hidden = lineage_check(build_graph(_events("(the session is in the state)")))
    assert not {b.op: b for b in hidden.breaks}["notes.write"].untyped


def test_checks_of_several_conversations_merge_to_one_line_per_op():
    check = lineage_check(build_graph(_events("nothing here to see")))
    lines = describe_breaks([check, check])
    assert len(lines) == 1 + len(check.breaks)
    assert "in 2 conversations" in lines[0] and "its 2 calls" in lines[1]
    assert describe_breaks([]) == []
