"""Mem0's store semantics: ADD / UPDATE / DELETE / NONE make the right versions, ids are remapped to small
integers and mapped back, unknown ids are skipped and counted, deleted memories are never retrieved."""

from __future__ import annotations

import json

import dspy
from memory_programs_kit import make_conversation, make_question

from memtrace_opt.programs import make_program
from memtrace_opt.programs.mem0 import map_actions
from memtrace_opt.testing import FakeCall, FakeEngine, Skill, fake_lm
from memtrace_opt.testing.skills import default_skills

FIRST = ["Alice lives in Paris.", "Alice has a cat named Tom.", "Alice works as a nurse."]
SECOND = ["Alice moved to Lyon in May 2023.", "Alice gave her cat Tom away.", "Alice works as a nurse."]


def scripted_facts(call: FakeCall) -> dict:
    return {"facts": SECOND if "Lyon" in call.inputs["new_messages"] else FIRST}


def scripted_decisions(call: FakeCall) -> dict:
    """Decides by the text of the memories shown, so it only works if the ids shown map back correctly."""
    shown = json.loads(call.inputs["existing_memories"])
    assert [m["id"] for m in shown] == [str(i) for i in range(len(shown))]  # small integers, not unit ids
    by_word = {word: m["id"] for m in shown for word in ("Paris", "cat", "nurse") if word in m["text"]}
    return {"memory_actions": [
        {"event": "UPDATE", "id": by_word["Paris"], "text": "Alice lived in Paris and moved to Lyon in May 2023."},
        {"event": "DELETE", "id": by_word["cat"], "text": ""},
        {"event": "NONE", "id": by_word["nurse"], "text": "Alice works as a nurse."},
        {"event": "UPDATE", "id": "99", "text": "an id the LM made up"},
        {"event": "DELETE", "id": "memory-1", "text": ""},  # a real unit id, but not one of those shown
        {"event": "MERGE", "id": "0", "text": "not an event"},
    ]}


def _conversation():
    return make_conversation([
        ("9:00 am on 2 April, 2023", [("Alice", "I live in Paris with my cat Tom and I work as a nurse.")]),
        ("9:00 am on 3 June, 2023", [("Alice", "I moved to Lyon last month and gave Tom to my sister.")]),
    ], [make_question("What is the name of Alice's cat?", "Tom")])


def _run(recorder):
    engine = FakeEngine(skills=[Skill(("facts",), scripted_facts), Skill(("memory_actions",), scripted_decisions),
                                *default_skills()])
    conversation = _conversation()
    program = make_program("mem0", {"embedder": "hash", "window_turns": 4})
    with dspy.context(lm=fake_lm(engine=engine), callbacks=[recorder]):
        state = program.new_state(conversation)
        program.memorize(conversation, state)
    return program, state, conversation


def test_add_update_delete_none_versions(recorder):
    _, state, _ = _run(recorder)
    paris, cat, nurse = (state.store.history(f"memory-{n}") for n in (1, 2, 3))
    assert [(u.version, u.deleted) for u in paris] == [(1, False), (2, False)]
    assert paris[-1].text == "Alice lived in Paris and moved to Lyon in May 2023."
    assert paris[-1].source_turns == ("D1:1", "D2:1")  # sources accumulate over versions
    assert paris[-1].timestamp == "9:00 am on 3 June, 2023"
    assert [(u.version, u.deleted) for u in cat] == [(1, False), (2, True)]
    assert [u.version for u in nurse] == [1]  # NONE leaves it alone
    assert len(state.store.all_versions()) == 5
    assert [u.unit_id for u in state.store.active()] == ["memory-1", "memory-3"]


def test_invalid_ids_are_skipped_and_counted(recorder):
    _run(recorder)
    decision = recorder.of("mem0.update_decision")[-1].outputs
    assert decision.invalid_ids == 2 and decision.invalid_items == 1
    assert [(a["event"], a["unit_id"]) for a in decision.memory_actions] == [
        ("UPDATE", "memory-1"), ("DELETE", "memory-2"), ("NONE", "memory-3")]
    applied = recorder.of("mem0.apply")[-1].outputs
    assert [u.ref for u in applied.updated] == ["mem:memory-1@2"]
    assert [u.ref for u in applied.deleted] == ["mem:memory-2@2"]
    assert applied.added == [] and applied.skipped == 0


def test_deleted_memory_is_never_retrieved(recorder):
    program, state, conversation = _run(recorder)
    with dspy.context(lm=fake_lm(default_skills()), callbacks=[recorder]):
        recorder.clear()
        program.respond(conversation.questions[0], state)
    retrieved = recorder.of("mem0.retrieve")[0].outputs.units
    assert retrieved and all(not u.deleted and u.unit_id != "memory-2" for u in retrieved)
    assert {u.ref for u in retrieved} <= {"mem:memory-1@2", "mem:memory-3@1"}  # only the latest live versions


def test_action_on_a_unit_deleted_earlier_in_the_window_is_skipped():
    from memtrace_opt.data import Conversation
    from memtrace_opt.programs.mem0 import ApplyActions

    program = make_program("mem0", {"embedder": "hash"})
    state = program.new_state(Conversation("x", ("A",), (), (), "test"))
    unit = state.store.add("A likes tea.")
    out = ApplyActions()(actions=[{"event": "DELETE", "unit_id": unit.unit_id, "text": ""},
                                  {"event": "UPDATE", "unit_id": unit.unit_id, "text": "A likes green tea."}],
                         turns=[], session_date=None, state=state)
    assert out.skipped == 1 and state.store.get(unit.unit_id).deleted


def test_map_actions_rules():
    actions, bad_ids, bad_items = map_actions(
        [{"event": "add", "text": " new  fact "}, {"event": "ADD", "text": ""}, "junk", {"event": "NONE", "id": 0},
         {"event": "DELETE", "id": "7"}], {"0": "memory-5"})
    assert actions == [{"event": "ADD", "unit_id": None, "text": "new fact"},
                       {"event": "NONE", "unit_id": "memory-5", "text": ""}]
    assert (bad_ids, bad_items) == (1, 2)


def test_only_similar_enough_memories_reach_the_decision(recorder):
    engine = FakeEngine(skills=[Skill(("facts",), scripted_facts), *default_skills()])
    conversation = _conversation()
    program = make_program("mem0", {"embedder": "hash", "window_turns": 4, "similar_min_score": 0.99})
    with dspy.context(lm=fake_lm(engine=engine), callbacks=[recorder]):
        state = program.new_state(conversation)
        program.memorize(conversation, state)
    search = recorder.of("mem0.search_similar")[-1].outputs
    # only the fact repeated word for word ("Alice works as a nurse.") finds its memory
    assert [u.text for u in search.memories] == ["Alice works as a nurse."]
    assert all(score >= 0.99 for entry in search.similar for score in entry["scores"])
    shown = json.loads(engine.calls_for("memory_actions")[0].inputs["existing_memories"])
    assert shown == [{"id": "0", "text": "Alice works as a nurse."}]
    assert [u.text for u in state.store.active()].count("Alice works as a nurse.") == 1  # NONE, not a duplicate
