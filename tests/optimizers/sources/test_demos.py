"""The demos candidate: the blamed predictor's current instruction with worked examples from its own correct
calls, read back from the recorded messages; accepted like any candidate, and only on that predictor."""

from __future__ import annotations

import random

import dspy
from optfixtures import ANSWER, DECIDE, EXTRACT, FIX, add_rules, reflect

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator, LoopSettings, MemTraceOptimizer, case_refs
from memtrace_opt.optimizers.core.program_io import (
    demos_of,
    instructions_of,
    load_optimized,
    save_program,
)
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric as Metric
from memtrace_opt.optimizers.sources.demos import CLOSE_F1, demo_from_exchange, demo_size, predictor_demos
from memtrace_opt.programs.mem0 import Mem0Memory
from memtrace_opt.testing import FakeCall, FakeEngine, Skill
from memtrace_opt.testing.skills import answer, default_skills


def shy_answer(call: FakeCall) -> dict:
    """Answers "What ..." questions; the others only when the prompt carries worked examples (demos)."""
    shown_examples = len(call.messages) > 2
    if shown_examples or call.inputs.get("question", "").startswith("What"):
        return answer(call)
    return {"answer": "I don't know"}


def shy_models() -> tuple[Models, FakeEngine]:
    engine = FakeEngine(skills=[Skill(("new_instruction",), reflect, name="reflect"),
                                Skill(("rules",), add_rules, name="add-rules"),
                                Skill(("answer",), shy_answer, name="answer"), *default_skills()])
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine), engine


def shy_evaluation(examples) -> tuple[Mem0Memory, EvalResult, CachedEvaluator]:
    """The unoptimized program over `examples` with the shy model: the calls demos are drawn from."""
    models, _ = shy_models()
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    program = Mem0Memory()
    return program, evaluator.evaluate(program, case_refs(examples)), evaluator


def test_a_demo_is_read_back_from_the_recorded_call_and_formats_to_the_same_message(examples):
    program, evaluation, evaluator = shy_evaluation(examples)
    demos = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=2)
    assert len(demos) == 2
    signature = dict(program.named_predictors())[ANSWER].signature
    passed = {c.question.question: c for c in evaluation.passed()}
    for demo in demos:
        assert set(demo) == set(signature.input_fields) | set(signature.output_fields)
        assert demo["question"] in passed and passed[demo["question"]].question.answer.lower() in demo["answer"].lower()
        user, assistant = dspy.ChatAdapter().format_demos(signature, [demo])
        assert "[[ ## question ## ]]\n" + demo["question"] in user["content"]
        assert assistant["content"].startswith("[[ ## answer ## ]]\n" + demo["answer"])
    assert demo_from_exchange(signature, "[[ ## question ## ]]\nWhat?", "[[ ## answer ## ]]\nx") is None  # no context
    assert demo_from_exchange(signature, "[[ ## context ## ]]\nc\n\n[[ ## question ## ]]\nq\n\nRespond with x",
                              "no fields") is None
    parsed = demo_from_exchange(signature, "[[ ## context ## ]]\nc\n\n[[ ## question ## ]]\nq\n\nRespond with x",
                                "[[ ## answer ## ]]\na\n\n[[ ## completed ## ]]")
    assert parsed == {"context": "c", "question": "q", "answer": "a"}  # the adapter's reminder is not an input
    assert predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=0) == []
    assert predictor_demos(program, ANSWER, evaluation, evaluator.memo, demo_chars=10) == []  # too long


def test_demos_stay_within_a_character_budget_counted_with_the_predictor_s_own(examples):
    program, evaluation, evaluator = shy_evaluation(examples)
    every = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=10, demo_budget=None)
    assert len(every) >= 3
    budget = demo_size(every[0]) + demo_size(every[1]) - 1  # the first fits, the second would not
    kept = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=10, demo_budget=budget)
    assert kept[0] == every[0] and every[1] not in kept and sum(map(demo_size, kept)) <= budget
    assert [d for d in every if d in kept] == kept  # the same order, passing over the ones that do not fit
    assert predictor_demos(program, ANSWER, evaluation, evaluator.memo, demo_budget=10) == []  # none fits

    dict(program.named_predictors())[ANSWER].demos = [every[0]]  # the predictor's own demo counts toward it
    budget = demo_size(every[0]) + demo_size(every[1])
    more = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=10, demo_budget=budget)
    assert more[0] == every[1] and every[0] not in more
    assert demo_size(every[0]) + sum(map(demo_size, more)) <= budget


def test_the_loop_gives_only_the_blamed_predictor_demos_when_they_win(examples, tmp_path):
    models, engine = shy_models()
    opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(local_objective=False, rounds=2, candidates=2,
                                                                      minibatch=9, demos=2),
                                        attribution="lineage")
    student = Mem0Memory()
    optimized = opt.compile(student, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    assert first.chosen_predictor == ANSWER and first.accepted
    winner = next(c for c in first.candidates if c.accepted)
    assert winner.instruction == first.previous_instruction and len(winner.demos) == 2  # the demos candidate
    assert all(c.demos is None for c in first.candidates if c is not winner)  # the proposals change text only
    # the best rewrite is gated on its own; the other rewrite is not validated and says which one went first
    assert [c.why for c in first.candidates[:2]] == [
        "rejected: minibatch 0.333 does not beat the current 0.333",
        "not validated: candidate 1 goes first on the minibatch (0.333; this one 0.000)"]
    assert first.val_accuracy > opt.result.baseline_val
    assert instructions_of(optimized) == instructions_of(student)  # no instruction changed
    demos = demos_of(optimized)
    assert len(demos[ANSWER]) == 2 and demos[EXTRACT] == [] and demos[DECIDE] == []
    record = first.to_dict()
    assert [c.get("demos") for c in record["candidates"] if c["accepted"]] == [winner.demos]
    # the program file keeps the demos; loaded again it answers as well
    path = save_program(optimized, tmp_path / "program.json")
    loaded = load_optimized(path)
    assert demos_of(loaded)[ANSWER] == demos[ANSWER]
    again = CachedEvaluator(Metric(), task_lm=models.task).evaluate(loaded, case_refs(examples)).accuracy
    assert again == first.val_accuracy
    assert any(len(c.messages) > 2 for c in engine.calls_for("answer"))


def test_a_minibatch_with_no_correct_case_still_gets_demos_from_the_training_pool(examples):
    """The shy model fails every question but "What ..." ones: a one-question minibatch that is not one has no
    correct call of its own, and only the pool of training cases traced for demos can supply them."""
    def order(seed):  # the loop's training order: the seeded shuffle of the trainset
        cases = case_refs(examples)
        random.Random(seed).shuffle(cases)
        return cases
    seed = next(s for s in range(50) if not order(s)[0].question.question.startswith("What"))

    def run(pool):
        models, _ = shy_models()
        opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(local_objective=False,
            rounds=1, candidates=1, minibatch=1, demos=2, demo_pool=pool, seed=seed))
        opt.compile(Mem0Memory(), trainset=examples, valset=examples)
        return opt.result.rounds[0]

    alone = run(0)  # the minibatch only: no correct case, so no demos candidate
    assert alone.chosen_predictor == ANSWER and all(c.demos is None for c in alone.candidates)
    pooled = run(len(examples))
    demos = [c for c in pooled.candidates if c.demos is not None]
    assert len(demos) == 1 and len(demos[0].demos) == 2
    assert all(d["question"].startswith("What") for d in demos[0].demos)  # calls that served a correct answer
    assert demos[0].minibatch_score == 1.0 and demos[0].accepted  # shown examples, the shy model answers


def test_a_rewrite_ahead_on_the_minibatch_is_validated_with_the_demos_first(examples):
    """On a two-question minibatch the rewrite (2/2) beats the demos (1/2); both pass it, so the rewrite with the demos
    goes to the valset first (7/9: with worked examples shown the model ignores the rewrite) and is taken; neither part
    is validated. (The kitten's name is never answered: the fake answer skill reads it as a number.)"""
    missed_by_rewrite = ("When did Alice visit the Louvre museum?", "When did Bob move to Porto?")

    def picky_answer(call: FakeCall) -> dict:
        question = call.inputs.get("question", "")
        if len(call.messages) > 2:  # shown worked examples: all but the "Who" question
            right = not question.startswith("Who")
        elif FIX.strip() in call.instruction:  # the rewrite: all but two dates
            right = question not in missed_by_rewrite
        else:
            right = question.startswith("What")
        return answer(call) if right else {"answer": "I don't know"}

    def order(seed):  # the loop's training order: the seeded shuffle of the trainset
        cases = case_refs(examples)
        random.Random(seed).shuffle(cases)
        return cases
    wanted = {"Who taught Alice pottery?", "When did Alice adopt a kitten?"}
    seed = next(s for s in range(5000) if {c.question.question for c in order(s)[:2]} == wanted)
    engine = FakeEngine(skills=[Skill(("new_instruction",), reflect, name="reflect"),
                                Skill(("rules",), add_rules, name="add-rules"),
                                Skill(("answer",), picky_answer, name="answer"), *default_skills()])
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(local_objective=False,
        rounds=1, candidates=1, minibatch=2, demos=2, seed=seed))
    optimized = opt.compile(Mem0Memory(), trainset=examples, valset=examples)
    assert opt.result.baseline_val == 3 / 9
    first = opt.result.rounds[0]
    rewrite, demos, both = first.candidates
    assert (rewrite.minibatch_score, demos.minibatch_score, both.minibatch_score) == (1.0, 0.5, None)
    assert (rewrite.val_score, demos.val_score, both.val_score) == (None, None, 7 / 9)
    assert rewrite.why == "not validated: the joined candidate was accepted first" and not rewrite.accepted
    assert both.origin == "combined" and both.accepted and not demos.accepted
    assert first.accepted and first.val_accuracy == 7 / 9
    assert len(demos_of(optimized)[ANSWER]) == 2 and instructions_of(optimized)[ANSWER] == rewrite.instruction


def test_demos_a_round_offered_and_the_program_did_not_take_are_not_offered_again(examples):
    """The model answers "What ..." questions and no others, demos or not: no demos candidate wins, and each
    round offers demos no round before it offered (without this, round 2 offers round 1's again)."""
    def stubborn_answer(call: FakeCall) -> dict:
        return answer(call) if call.inputs.get("question", "").startswith("What") else {"answer": "I don't know"}

    engine = FakeEngine(skills=[Skill(("new_instruction",), reflect, name="reflect"),
                                Skill(("rules",), add_rules, name="add-rules"),
                                Skill(("answer",), stubborn_answer, name="answer"), *default_skills()])
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(local_objective=False,
        rounds=3, patience=3, candidates=1, minibatch=9, demos=1, validate_ties=True))
    optimized = opt.compile(Mem0Memory(), trainset=examples, valset=examples)
    offered = [[c.demos for c in r.candidates if c.demos is not None and c.origin != "combined"]
               for r in opt.result.rounds]
    assert [r.chosen_predictor for r in opt.result.rounds] == [ANSWER] * 3 and not any(
        r.accepted for r in opt.result.rounds)
    assert [len(each) for each in offered[:2]] == [1, 1]  # a demos candidate in rounds 1 and 2 (one demo each)
    questions = [candidate[0][0]["question"] for candidate in offered if candidate]
    assert len(questions) >= 2 and len(set(questions)) == len(questions)  # never the same demo twice
    assert all(q.startswith("What") for q in questions)  # each from a call that served a correct answer
    assert demos_of(optimized)[ANSWER] == []


def test_without_demos_the_round_has_only_the_proposals(examples):
    models, _ = shy_models()
    opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(rounds=1, candidates=2,
                                                                      minibatch=9, demos=0),
                                        attribution="lineage")
    opt.compile(Mem0Memory(), trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    assert first.chosen_predictor == ANSWER and not first.accepted
    assert all(c.demos is None for c in first.candidates) and len(first.candidates) <= 2


def test_a_call_whose_reply_loops_or_is_cut_short_is_no_demo():
    from memtrace_opt.optimizers.sources.demos import well_formed

    assert well_formed('["Wenna is a cellist.", "Bartek sold his bakery."]') and well_formed("12 March 2034")
    assert not well_formed('["Wenna is a cellist.", "Bartek sold his bakery.", "wenna is a  cellist."]')  # said twice
    assert not well_formed('["Wenna is a cellist.", "Bartek sold his')  # cut by the token limit
    assert not well_formed("Step one.\nStep two.\nStep one.")
    signature = Mem0Memory().extract_facts.predict.signature
    prompt = "".join(f"[[ ## {name} ## ]]\nx\n\n" for name in signature.input_fields)
    looped = '[[ ## facts ## ]]\n["Bartek likes kites.", "Bartek likes kites."]\n\n[[ ## completed ## ]]'
    assert demo_from_exchange(signature, prompt, looped) is None
    fine = '[[ ## facts ## ]]\n["Bartek likes kites."]\n\n[[ ## completed ## ]]'
    assert demo_from_exchange(signature, prompt, fine) == {**dict.fromkeys(signature.input_fields, "x"),
                                                           "facts": '["Bartek likes kites."]'}


def test_demos_like_the_blamed_calls_come_first_and_a_shared_field_is_not_compared():
    from memtrace_opt.optimizers.sources.demos import closest_first

    transcript = "Wenna: I opened my cello school in March. Bartek: I left the ferry company and bought a bakery oven."
    demos = [{"context": transcript, "question": q, "answer": a} for q, a in (
        ("What does Bartek bake?", "bread"),
        ("When did Wenna open her cello school?", "March 2034"),
        ("Which city does Bartek live in?", "Tallinn"),
    )]
    blamed = f"[[ ## context ## ]]\n{transcript}\n\n[[ ## question ## ]]\nWhen did Wenna start teaching at the school?"
    order = closest_first(["context", "question"], demos, [blamed], embedder=None)
    assert order[0] == 1 and sorted(order) == [0, 1, 2]
    # the transcript is the same in every call: ranking on it alone would say nothing, so it is left out and
    # a question with no word in common with the blamed one keeps its place behind the one that has
    assert closest_first(["context", "question"], demos, [], embedder=None) == [0, 1, 2]
    same = [dict(d, question="What is it?") for d in demos]
    assert closest_first(["context", "question"], same, [f"[[ ## context ## ]]\n{transcript}\n\n[[ ## question ## ]]"
                                                          "\nWhat is it?"], embedder=None) == [0, 1, 2]


def test_predictor_demos_puts_the_call_most_like_a_blamed_one_first(examples):
    program, evaluation, evaluator = shy_evaluation(examples)
    everyone = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=10, embedder=None)
    assert len(everyone) >= 2
    f1 = {c.question.question: c.score.scores["f1"] for c in evaluation.passed()}
    tier = [demo for demo in everyone if (f1[demo["question"]] >= CLOSE_F1) == (f1[everyone[0]["question"]] >= CLOSE_F1)]
    assert len(tier) >= 2
    last = tier[-1]
    like = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in last.items() if name != "answer")
    first = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=1, like=[like], embedder=None)
    assert first == [last] and everyone[0] != last


def test_a_case_right_only_by_holding_the_gold_words_among_many_gives_no_demo(examples):
    def wordy_answer(call: FakeCall) -> dict:
        """Answers "What ..." questions in a few words, the others at length around the right answer."""
        reply = answer(call)
        if call.inputs.get("question", "").startswith("What"):
            return reply
        return {"answer": f"From what was said in the conversation it seems to be {reply['answer']}, as far as "
                          "anyone there remembers it now"}

    engine = FakeEngine(skills=[Skill(("answer",), wordy_answer, name="answer"), *default_skills()])
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    program = Mem0Memory()
    evaluation = evaluator.evaluate(program, case_refs(examples))
    wordy = [c for c in evaluation.passed() if not c.question.question.startswith("What")]
    assert wordy and all(c.score.scores["f1"] <= 0.5 for c in wordy)  # right by the token rule's full recall
    demos = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=10, embedder=None)
    assert demos and all(demo["question"].startswith("What") for demo in demos)


def test_answers_close_to_the_gold_come_before_those_only_right_by_f1_even_when_less_like_the_blamed(examples):
    from memtrace_opt.metrics import answer_tokens

    def padded_answer(call: FakeCall) -> dict:
        """Answers "What ..." questions exactly, the others with as many filler words again (F1 about 0.67)."""
        reply = answer(call)
        if call.inputs.get("question", "").startswith("What"):
            return reply
        return {"answer": " ".join([reply["answer"], *["indeed"] * len(answer_tokens(reply["answer"]))])}

    engine = FakeEngine(skills=[Skill(("answer",), padded_answer, name="answer"), *default_skills()])
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    program = Mem0Memory()
    evaluation = evaluator.evaluate(program, case_refs(examples))
    f1 = {c.question.question: c.score.scores["f1"] for c in evaluation.passed()}
    assert any(0.5 < value < CLOSE_F1 for value in f1.values()) and any(value >= CLOSE_F1 for value in f1.values())
    everyone = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=20, embedder=None)
    tiers = [f1[demo["question"]] >= CLOSE_F1 for demo in everyone]
    assert True in tiers and False in tiers and tiers == sorted(tiers, reverse=True)  # close ones first
    last = everyone[-1]  # a padded answer: the one most like it is itself, yet a close answer goes first
    like = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in last.items() if name != "answer")
    first = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=1, like=[like], embedder=None)
    assert f1[first[0]["question"]] >= CLOSE_F1
    padded_first = predictor_demos(program, ANSWER, evaluation, evaluator.memo, demos=20, like=[like],
                                   embedder=None)
    assert padded_first[tiers.index(False)] == last  # within its tier, the most like the blamed call leads
