"""The default fake skills behave as their SKILL RULES table says, and a better instruction fixes an op."""

from __future__ import annotations

import json

import dspy

from memtrace_opt.programs import make_program
from memtrace_opt.programs.common import AnswerQuestion
from memtrace_opt.programs.evermemos import (
    CheckSufficiencySignature,
    DetectBoundarySignature,
    ExtractEpisodeSignature,
    ExtractEventLogSignature,
)
from memtrace_opt.programs.mem0 import ExtractFactsSignature, UpdateDecisionSignature
from memtrace_opt.testing import FakeCall, fake_lm
from memtrace_opt.testing.skills import ABSTAIN, default_skills, resolve_relative

SKILLS = {skill.name: skill.fn for skill in default_skills()}
TRANSCRIPT = "[Monday, 12 April 2021]\nOdalys: I joined a sea-swimming club yesterday and the water was freezing.\n" \
             "Teodor: I carved a wooden fox last year and I keep it in the hallway."


def call(instruction: str, **inputs: str) -> FakeCall:
    return FakeCall(instruction, inputs, (), ())


def test_default_instructions_trigger_the_good_behaviour():
    """The shipped instructions contain every keyword their skill rule needs."""
    assert "date" in ExtractFactsSignature.instructions.lower()
    assert all(word in UpdateDecisionSignature.instructions.lower() for word in ("merge", "contradict"))
    assert "topic" in DetectBoundarySignature.instructions.lower()
    assert "absolute" in ExtractEpisodeSignature.instructions.lower()
    assert "date" in ExtractEventLogSignature.instructions.lower()
    assert "enough" in CheckSufficiencySignature.instructions.lower()
    assert "context" in AnswerQuestion.instructions.lower() and "date" in AnswerQuestion.instructions.lower()


def test_extract_facts_drops_dated_facts_unless_told_about_dates():
    inputs = {"session_date": "Monday, 12 April 2021", "new_messages": TRANSCRIPT}
    with_dates = SKILLS["extract_facts"](call("Keep dates and resolve them.", **inputs))["facts"]
    without = SKILLS["extract_facts"](call("Write down facts.", **inputs))["facts"]
    assert any("11 April 2021" in f and f.startswith("Odalys") for f in with_dates)
    assert any("in 2020" in f for f in with_dates)
    assert without == []  # both sentences carry a time word


def test_update_decision_rules():
    memories = json.dumps([{"id": "0", "text": "Alice plans a trip to Japan in June with her sister."},
                           {"id": "1", "text": "Alice teaches chemistry at Westbrook High."}])
    facts = json.dumps(["Alice cancelled the trip to Japan.", "Alice teaches chemistry at Westbrook High.",
                        "Alice teaches chemistry and biology at Westbrook High.", "Alice owns a red bicycle."])
    full = SKILLS["update_decision"](call("merge ... contradict", existing_memories=memories, new_facts=facts))
    events = [(a["event"], a["id"]) for a in full["memory_actions"]]
    assert events == [("DELETE", "0"), ("ADD", ""), ("NONE", "1"), ("UPDATE", "1"), ("ADD", "")]
    assert "biology" in full["memory_actions"][3]["text"] and "Westbrook" in full["memory_actions"][3]["text"]
    bare = SKILLS["update_decision"](call("decide", existing_memories=memories, new_facts=facts))
    assert [a["event"] for a in bare["memory_actions"]] == ["ADD", "NONE", "ADD", "ADD"]


def test_boundary_needs_topic_in_the_instruction():
    inputs = {"current_episode": "Ann: my garden tomatoes ripened", "newest_messages": "Ben: quarterly budget review"}
    assert SKILLS["detect_boundary"](call("a new topic starts", **inputs))["episode_ends"] is True
    assert SKILLS["detect_boundary"](call("decide", **inputs))["episode_ends"] is False
    same = {"current_episode": "Ann: my garden tomatoes ripened", "newest_messages": "Ben: garden tomatoes ripened!"}
    assert SKILLS["detect_boundary"](call("a new topic starts", **same))["episode_ends"] is False


def test_episode_and_events_date_rules():
    inputs = {"episode_date": "Monday, 12 April 2021", "conversation": TRANSCRIPT}
    episode = SKILLS["extract_episode"](call("use absolute dates", **inputs))["episode"]
    assert episode.startswith("On 12 April 2021,") and "11 April 2021" in episode
    assert "yesterday" in SKILLS["extract_episode"](call("summarise", **inputs))["episode"]
    events = SKILLS["extract_event_log"](call("with the date", **inputs))["events"]
    assert events and all(e.endswith("(12 April 2021)") for e in events)
    assert SKILLS["extract_event_log"](call("list events", **inputs))["events"] == []


def test_sufficiency_and_queries():
    context = "[Monday, 12 April 2021]\n- Odalys joined a sea-swimming club on 11 April 2021."
    ok = SKILLS["check_sufficiency"](call("is it enough", context=context, question="When did Odalys join the sea-swimming club?"))
    assert ok["sufficient"] is True
    missing = SKILLS["check_sufficiency"](call("is it enough", context=context, question="What car does Odalys drive?"))
    assert missing["sufficient"] is False and "car" in missing["missing_information"]
    assert SKILLS["check_sufficiency"](call("judge", context=context, question="What car does Odalys drive?"))["sufficient"]
    queries = SKILLS["generate_queries"](call("queries", question="What car does Odalys drive?",
                                              missing_information="car drive"))["queries"]
    assert 1 <= len(queries) <= 3 and all("car" in q for q in queries)


def test_answer_rules():
    context = ("[Monday, 12 April 2021]\nOdalys: I joined a sea-swimming club yesterday.\n"
               "Teodor: My cat is named Marzipan and she loves naps.\n[Friday, 14 May 2021]\n"
               "Odalys: I have sung in this choir for 4 years now.")
    ask = lambda instruction, question: SKILLS["answer"](call(instruction, context=context, question=question))["answer"]  # noqa: E731
    good = "Answer from the context; give a date."
    assert ask(good, "When did Odalys join the sea-swimming club?") == "11 April 2021"
    assert ask("Answer from the context.", "When did Odalys join the sea-swimming club?") == "yesterday"
    assert ask(good, "How long has Odalys sung in the choir?") == "4 years"
    assert ask(good, "What is the name of Teodor's cat?") == "Marzipan"
    assert ask(good, "What is the name of Odalys's cat?") == ABSTAIN  # the name in the question must match
    assert ask(good, "What car does Teodor drive?") == ABSTAIN
    assert ask("Answer briefly.", "What is the name of Teodor's cat?") == ABSTAIN  # no "context": abstains


def test_resolve_relative_dates():
    from datetime import date

    day = date(2021, 4, 12)  # a Monday
    assert resolve_relative("I ran last Saturday", day) == "I ran on 10 April 2021"
    assert resolve_relative("we met last week", day) == "we met the week before 12 April 2021"
    assert resolve_relative("next month we go", day) == "in May 2021 we go"
    assert resolve_relative("yesterday", None) == "yesterday"


def test_a_better_extraction_instruction_fixes_a_temporal_answer(sample):
    """A degraded extraction prompt (no dates) loses the date fact; the shipped one answers it."""
    question = next(q for q in sample.questions if q.question.startswith("When did Maya run"))

    def answer_with(program):
        with dspy.context(lm=fake_lm(default_skills())):
            state = program.new_state(sample)
            program.memorize(sample, state)
            return program.respond(question, state).answer

    program = make_program("mem0", {"embedder": "hash"})
    assert answer_with(program) == question.answer == "16 April 2023"
    degraded = program.deepcopy()
    degraded.extract_facts.predict.signature = degraded.extract_facts.predict.signature.with_instructions(
        "Write down the facts worth remembering from the new messages as a JSON list of strings.")
    assert answer_with(degraded) == ABSTAIN
    assert "date" in program.extract_facts.instruction  # the original program is untouched


def test_judge_skill():
    verdict = lambda gold, prediction: SKILLS["judge"](call("judge", question="q", gold_answer=gold, prediction=prediction))["verdict"]  # noqa: E731
    assert verdict("11 April 2021", "on 11 April 2021") == "CORRECT"
    assert verdict("Boston, Denver", "Denver") == "CORRECT"
    assert verdict("Chemistry", "physics") == "WRONG"
    assert verdict("Not mentioned in the conversation", "Not mentioned in the conversation") == "CORRECT"
    assert verdict("Not mentioned in the conversation", "Biscuit") == "WRONG"
    assert verdict("Biscuit", "Not mentioned in the conversation") == "WRONG"


def test_the_scripted_judge_reads_declines_by_the_one_rule():
    """The fake judge declines as `metrics.is_decline` does, not by a test of its own."""
    verdict = lambda gold, prediction: SKILLS["judge"](call("judge", question="q", gold_answer=gold, prediction=prediction))["verdict"]  # noqa: E731
    assert verdict(ABSTAIN, "The conversation does not say where she keeps it.") == "CORRECT"
    assert verdict(ABSTAIN, "There is no information about a boat.") == "CORRECT"
    assert verdict("none of the kayaks", "None of the kayaks were damaged") == "CORRECT"  # an answer, not a decline
    assert verdict("an unknown painter", "An unknown painter from the harbour") == "CORRECT"
