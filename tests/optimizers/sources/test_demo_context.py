"""Compact demos: an answer demo's long context cut to the lines around its answer (its evidence turns, else the
lines most like its question and answer), and only for the step that writes the answers."""

from __future__ import annotations

from dataclasses import replace

from optfixtures import ANSWER, EXTRACT
from toydata import SESSIONS, toy_conversation

from memtrace_opt.data import Conversation, Session, Turn
from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import (
    AnswerMetric,
    CachedEvaluator,
    LoopSettings,
    MemTraceOptimizer,
    case_refs,
    make_examples,
)
from memtrace_opt.optimizers.sources.demo_context import (
    COMPACT_CHARS,
    case_anchors,
    compact_context,
    writes_answers,
)
from memtrace_opt.optimizers.sources.demos import predictor_demos
from memtrace_opt.programs.long_context import LongContextMemory
from memtrace_opt.programs.mem0 import Mem0Memory
from memtrace_opt.testing import FakeCall, FakeEngine, Skill
from memtrace_opt.testing.skills import answer, default_skills

LC_ANSWER = "answer.predict"
TRANSCRIPT = "\n".join([
    "[Monday, 13 March 2034]",
    "Alice: We spent the morning talking about the weather and the trains.",
    "Bob: The trains were late again, as they were all of last week.",
    "Alice: My neighbour repainted her fence a pale shade of green.",
    "Bob: I adopted a kitten yesterday, her name is Luna.",
    "Alice: That is lovely news, congratulations to you both.",
    "Bob: Thanks, she sleeps most of the day on the sofa.",
    "Alice: Mine did the same when she was small.",
    "Bob: Let us meet again next week.",
    "[Friday, 21 April 2034]",
    "Alice: I bought a red sailboat called Marlin.",
    "Bob: Yes!",
])


def test_the_cut_keeps_the_evidence_turn_its_neighbours_and_the_date_it_was_said_on():
    cut = compact_context(TRANSCRIPT, ["I adopted a kitten yesterday, her name is Luna."], window=1)
    assert cut == "\n".join([
        "[Monday, 13 March 2034]",
        "...",
        "Alice: My neighbour repainted her fence a pale shade of green.",
        "Bob: I adopted a kitten yesterday, her name is Luna.",
        "Alice: That is lovely news, congratulations to you both.",
        "...",
    ])
    # a turn of the second session is shown under its own date; two evidence turns keep both places
    both = compact_context(TRANSCRIPT, ["I adopted a kitten yesterday, her name is Luna.", "I bought a red sailboat called Marlin."], window=0)
    assert both == "\n".join(["[Monday, 13 March 2034]", "...", "Bob: I adopted a kitten yesterday, her name is Luna.",
                              "...", "[Friday, 21 April 2034]", "Alice: I bought a red sailboat called Marlin.", "..."])


def test_a_short_evidence_turn_is_found_only_where_it_ends_a_line():
    text = "\n".join(["[Monday, 13 March 2034]", "Alice: Yes! I would love to see the boat this summer.",
                      *[f"Bob: Filler line number {n} about nothing in particular." for n in range(6)], "Bob: Yes!"])
    assert compact_context(text, ["Yes!"], window=0) == "[Monday, 13 March 2034]\n...\nBob: Yes!"


def test_without_evidence_the_lines_most_like_the_question_and_answer_are_kept():
    cut = compact_context(TRANSCRIPT, [], "What is the name of Bob's kitten? Luna", window=0, embedder=None)
    assert "Bob: I adopted a kitten yesterday, her name is Luna." in cut and len(cut) < len(TRANSCRIPT) // 2
    assert "fence" not in cut and cut.startswith("[Monday, 13 March 2034]")


def test_a_context_with_nothing_to_anchor_on_or_no_shorter_stays_whole():
    assert compact_context(TRANSCRIPT, ["a turn that was never said"], window=1) == TRANSCRIPT
    assert compact_context(TRANSCRIPT, [], "", window=1) == TRANSCRIPT
    short = "[Monday, 13 March 2034]\nBob: I adopted a kitten yesterday."
    assert compact_context(short, ["I adopted a kitten yesterday."]) == short


def long_conversation() -> Conversation:
    """The toy conversation with small talk between its turns: a transcript over `COMPACT_CHARS`."""
    sessions = []
    for index, (date, lines) in enumerate(SESSIONS, start=1):
        turns: list[Turn] = []
        for speaker, text in lines:
            for filler in range(3):
                turns.append(Turn(dia_id=f"D{index}:{len(turns) + 1}", speaker="Bob" if speaker == "Alice" else "Alice",
                                  text=f"Small talk {filler} about the weather on the coast, nothing worth keeping.",
                                  session_index=index, timestamp=date))
            turns.append(Turn(dia_id=f"D{index}:{len(turns) + 1}", speaker=speaker, text=text, session_index=index,
                              timestamp=date))
        sessions.append(Session(index=index, date_time=date, turns=tuple(turns)))
    toy = toy_conversation("toy-long")
    moved = {turn.text: turn.dia_id for session in sessions for turn in session.turns}
    said = {turn.dia_id: turn.text for session in toy.sessions for turn in session.turns}
    questions = tuple(replace(q, evidence=tuple(moved[said[e]] for e in q.evidence)) for q in toy.questions)
    return Conversation("toy-long", toy.speakers, tuple(sessions), questions, "toy")


def fake_models(answer_skill=answer) -> Models:
    engine = FakeEngine(skills=[Skill(("answer",), answer_skill, name="answer"), *default_skills()])
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)


def test_long_context_answer_demos_show_the_lines_around_the_answer_and_other_steps_stay_whole():
    conversation = long_conversation()
    examples = make_examples([conversation])
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=fake_models().task)
    program = LongContextMemory()
    evaluation = evaluator.evaluate(program, case_refs(examples))
    assert evaluation.passed() and writes_answers(LC_ANSWER, [evaluation])
    full = predictor_demos(program, LC_ANSWER, evaluation, evaluator.memo, demos=3, embedder=None)
    cut = predictor_demos(program, LC_ANSWER, evaluation, evaluator.memo, demos=3, embedder=None, compact=True)
    assert len(full) == len(cut) == 3 and all(len(d["context"]) > COMPACT_CHARS for d in full)
    passed = {c.question.question: c for c in evaluation.passed()}
    for whole, shown in zip(full, cut, strict=True):
        assert shown["question"] == whole["question"] and shown["answer"] == whole["answer"]
        assert len(shown["context"]) < len(whole["context"]) // 3 and "\n...\n" in shown["context"]
        evidence = case_anchors(passed[shown["question"]])
        assert evidence and all(turn in shown["context"] for turn in evidence)  # the turn the answer rests on
        assert shown["context"].startswith("[")  # under the date it was said on

    # Mem0's extraction writes no answer: its demos would not be cut; its answer step does write them
    mem0_eval = CachedEvaluator(AnswerMetric(), task_lm=fake_models().task).evaluate(Mem0Memory(), case_refs(examples))
    assert writes_answers(ANSWER, [mem0_eval]) and not writes_answers(EXTRACT, [mem0_eval])


def test_the_loop_accepts_compact_demos_for_long_context_and_full_ones_when_asked():
    def shy(call: FakeCall) -> dict:
        """Answers "What ..." questions; the others only when shown worked examples."""
        if len(call.messages) > 2 or call.inputs.get("question", "").startswith("What"):
            return answer(call)
        return {"answer": "I don't know"}

    examples = make_examples([long_conversation()])

    def run(compact: bool) -> list[dict]:
        opt = MemTraceOptimizer.from_models(fake_models(shy), attribution="lineage", settings=LoopSettings.of(
            rounds=1, candidates=1, minibatch=9, demos=2, compact_demos=compact, local_objective=False))
        opt.compile(LongContextMemory(), trainset=examples, valset=examples)
        first = opt.result.rounds[0]
        winner = next(c for c in first.candidates if c.accepted)
        assert first.chosen_predictor == LC_ANSWER and winner.demos is not None
        return winner.demos

    compact, whole = run(True), run(False)
    assert len(compact) == len(whole) == 2
    assert all(len(c["context"]) < len(w["context"]) // 3 for c, w in zip(compact, whole, strict=True))
    assert [c["question"] for c in compact] == [w["question"] for w in whole]  # the same calls, shown shorter
