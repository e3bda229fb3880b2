"""The diagnosis of blamed answers (`diagnosis.py`) and what the proposer and the loop make of it: the mistake is
named to the reflection LM, and the found patterns' rules fill the slots its replies leave empty."""

from __future__ import annotations

import dspy
from optfixtures import ANSWER

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import (
    LoopSettings,
    MemTraceOptimizer,
    OpEvidence,
    ProposalEvidence,
    ReflectiveProposer,
    instructions_of,
    with_instruction,
)
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, diagnose
from memtrace_opt.optimizers.evaluation.program_io import demos_of
from memtrace_opt.programs.long_context import LongContextMemory
from memtrace_opt.testing import FakeEngine, Skill, fake_lm
from memtrace_opt.testing.skills import answer, default_skills

CONTEXT = "Maria: I gave my old car to the homeless shelter last week.\nJohn: I did kickboxing and taekwondo."


def names(*cases: tuple[str, str, str]) -> list[str]:
    """The patterns found in (gold, answer, shown) cases whose step wrote the answer."""
    found = diagnose([(f"c{i}", gold, answer, shown, answer) for i, (gold, answer, shown) in enumerate(cases)])
    return [finding.pattern.name for finding in found]


def test_each_pattern_is_found_in_the_answer_that_shows_it_and_not_in_a_right_one():
    assert names(("Kickboxing, Taekwondo", "Kickboxing", CONTEXT)) == ["partial_list"]
    assert names(("Kickboxing, Taekwondo", "Kickboxing and Taekwondo", CONTEXT)) == []
    assert names(("19 January, 2023", "7 May 2023", CONTEXT)) == []  # a date with a comma is not a list
    assert names(("The sunday before 25 May 2023", "2023-05-26", CONTEXT)) == ["date_form"]
    assert names(("2019", "3 years ago", CONTEXT)) == ["date_form"]
    assert names(("The sunday before 25 May 2023", "26 May 2023", CONTEXT)) == []  # wrong day, right form
    assert names(("old car", "Not mentioned in the conversation", CONTEXT)) == ["declined"]
    assert names(("old car", "None", CONTEXT)) == ["declined"]
    assert names(("a red bicycle", "None", CONTEXT)) == []  # the context does not hold it: declining is right
    assert names(("No", "Not mentioned in the conversation", CONTEXT)) == []  # "no" is in any context
    long = "Maria said that she was thinking about giving something to the shelter near her home one day soon"
    assert names(("old car", long, CONTEXT)) == ["verbose"]
    assert names(("old car", "her old car, which she gave to the shelter near her home last week", CONTEXT)) == []


def test_the_most_shown_pattern_comes_first_and_an_upstream_step_is_not_diagnosed():
    found = diagnose([("a", "2019", "last year", "", "last year"), ("b", "2022", "2022-03-01", "", "2022-03-01"),
                      ("c", "Kickboxing, Taekwondo", "Kickboxing", "", "Kickboxing")])
    assert [(f.pattern.name, f.cases) for f in found] == [("date_form", ("a", "b")), ("partial_list", ("c",))]
    # an extraction step whose reply is a list of facts: the answer's shape says nothing about it
    assert diagnose([("a", "2019", "last year", "", '["Nate got turtles in 2019."]')]) == []


def echo_models(answer_skill=None) -> Models:
    """The fake models with a reflection LM that only hands the current instruction back, and `answer_skill`
    (if given) as the answer step."""
    echo = [Skill(("rules",), lambda call: {"rules": call.inputs["current_instruction"]}),
            Skill(("new_instruction",), lambda call: {"new_instruction": call.inputs["current_instruction"]})]
    answering = [Skill(("answer",), answer_skill, name="answer")] if answer_skill is not None else []
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=FakeEngine(skills=[*echo, *answering,
                                                                                   *default_skills()]))


def _evidence(instruction: str) -> ProposalEvidence:
    case = OpEvidence("c1", "When did Nate get his turtles?", "2019", "3 years ago", "...", "3 years ago", "")
    return ProposalEvidence(ANSWER, "long_context.answer", instruction, failures=(case,),
                            findings=tuple(diagnose([("c1", "2019", "3 years ago", "...", "3 years ago")])))


def test_the_proposer_names_the_mistake_and_fills_echoed_slots_with_the_patterns_rule():
    current = "Answer the question from the context, in a few words."
    seen: list[str] = []

    def echo_rules(call):
        seen.append(call.inputs["mistake"])
        return {"rules": current}

    def echo_rewrite(call):
        seen.append(call.inputs["mistake"])
        return {"new_instruction": current}

    date_rule = next(p.rule for p in PATTERNS if p.name == "date_form")
    lm = fake_lm([Skill(("rules",), echo_rules), Skill(("new_instruction",), echo_rewrite)])
    with dspy.context(lm=lm):
        found = ReflectiveProposer().propose(_evidence(current), 2)
        without = ReflectiveProposer(pattern_rules=False).propose(_evidence(current), 2)
    assert found == [current + "\n" + date_rule]  # the LM's replies were echoes; one pattern was found
    assert without == []
    assert seen and all("relative time" in m and "1 of the blamed cases" in m for m in seen)
    with dspy.context(lm=lm):  # an instruction that has the rule already gets no copy of it
        assert ReflectiveProposer().propose(_evidence(current + "\n" + date_rule), 2) == []


def test_the_loop_accepts_a_patterns_rule_where_the_reflection_lm_only_echoes(examples):
    """The fake answerer resolves a relative date only when its instruction says "date": the planted answer
    instruction does not, the reflection LM echoes it back, and the diagnosed `date_form` rule fixes it."""
    planted = "Answer the question from the context, in a few words."
    program = with_instruction(LongContextMemory(), ANSWER, planted)
    models = echo_models()

    def run(pattern_rules: bool) -> tuple[MemTraceOptimizer, dspy.Module]:
        opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
            rounds=2, candidates=2, minibatch=9, demos=0, pattern_rules=pattern_rules))
        return opt, opt.compile(program, trainset=examples, valset=examples)

    unaided, same = run(False)
    assert not any(r.accepted for r in unaided.result.rounds)  # echoes only: nothing to evaluate
    assert instructions_of(same)[ANSWER] == planted
    opt, optimized = run(True)
    first = opt.result.rounds[0]
    assert first.accepted and first.val_accuracy > opt.result.baseline_val
    taken = next(c for c in first.candidates if c.accepted)
    assert taken.origin == "pattern:date_form"
    # the manifest's round says what the diagnosis found, and in which cases
    dates = next(f for f in first.to_dict()["findings"] if f["pattern"] == "date_form")
    assert dates["cases"] and all(case.endswith("-when") for case in dates["cases"])
    assert instructions_of(optimized)[ANSWER] == taken.instruction and "date" in taken.instruction.lower()


def test_a_rewrite_that_passes_the_minibatch_beside_demos_is_validated_with_them(examples):
    """The fake answerer answers "Who" questions only with worked examples in its prompt, and resolves "when"
    dates only with "date" in its instruction: the demos fix one question, the diagnosed date rule more, and
    only the two together fix all of them."""
    planted = "Answer the question from the context, in a few words."

    def shy_who(call):
        if call.inputs.get("question", "").startswith("Who") and len(call.messages) <= 2:
            return {"answer": "I don't know"}
        return answer(call)

    models = echo_models(shy_who)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=1, candidates=1, minibatch=9, demos=2, min_val_questions=1))
    program = with_instruction(LongContextMemory(), ANSWER, planted)
    optimized = opt.compile(program, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    rule, demos, both = first.candidates
    assert rule.origin == "pattern:date_form" and demos.demos and both.origin == "combined"
    assert rule.minibatch_score > demos.minibatch_score  # both beat the planted instruction's minibatch score
    assert rule.val_score is None and rule.why == "not validated alone: validated with the demos of candidate 2"
    assert demos.val_score > opt.result.baseline_val and not demos.accepted and "is taken" in demos.why
    assert both.accepted and both.val_score > demos.val_score and both.minibatch_score is None
    assert (both.instruction, both.demos) == (rule.instruction, demos.demos)
    assert instructions_of(optimized)[ANSWER] == rule.instruction
    assert demos_of(optimized)[ANSWER] == demos.demos and first.val_accuracy == both.val_score


def test_a_rewrite_is_validated_alone_when_neither_the_demos_nor_the_two_together_pass(examples):
    """With worked examples shown the fake answerer answers only "What" and "Who" questions: the demos gain one
    question (too few to pass), the rewrite with them the same; the date rule alone gains three."""
    planted = "Answer the question from the context, in a few words."

    def led_by_examples(call):
        question = call.inputs.get("question", "")
        if len(call.messages) > 2:
            return answer(call) if question.startswith(("What", "Who")) else {"answer": "I don't know"}
        return answer(call) if not question.startswith("Who") else {"answer": "I don't know"}

    models = echo_models(led_by_examples)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=1, candidates=1, minibatch=9, demos=2))
    optimized = opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples,
                            valset=examples)
    rule, demos, both = opt.result.rounds[0].candidates
    assert not demos.accepted and not both.accepted and demos.val_score == both.val_score
    assert rule.origin == "pattern:date_form" and rule.accepted and rule.val_score > demos.val_score
    assert instructions_of(optimized)[ANSWER] == rule.instruction and demos_of(optimized)[ANSWER] == []


def test_candidates_the_calls_left_cannot_validate_wait_for_a_resumed_run(examples, tmp_path):
    """A candidate's minibatch takes nine answer calls (its validation on the same nine questions replays them):
    with 8 calls left after the proposals none is evaluated; resumed with a larger budget, the round evaluates
    them and takes the date rule, without running the baseline again."""
    planted = "Answer the question from the context, in a few words."
    storage = f"sqlite:///{tmp_path / 'study.db'}"

    def run(budget: int) -> MemTraceOptimizer:
        opt = MemTraceOptimizer.from_models(echo_models(), attribution="lineage", storage=storage,
                                            study_name="short", settings=LoopSettings.of(
                                                rounds=1, candidates=2, minibatch=9, demos=2,
                                                budget=budget))
        opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples, valset=examples)
        return opt

    short = run(21)
    cut = short.result.manifest_part()["optimizer"]["interrupted"]
    assert short.result.rounds == [] and short.result.lm_calls == 13  # the baseline's 9 and 4 reflection calls
    assert cut["why"] == "cut short: 8 LM calls left, too few to validate another candidate"
    assert [c["minibatch_score"] for c in cut["candidates"]] == [None, None]  # nothing spent on them
    resumed = run(60)
    first = resumed.result.rounds[0]
    assert first.accepted and next(c for c in first.candidates if c.accepted).origin == "pattern:date_form"
    # the baseline and the proposals come from the study: the resumed run's calls are the candidate's minibatch
    # and its validation
    assert resumed.result.lm_calls_by_role == {"task": 18} and resumed.result.lm_calls == 13 + 18


def test_the_calls_left_are_counted_without_the_valset_questions_the_minibatch_answered(examples, tmp_path):
    """Valset and training set are the same nine questions (as a caller of `compile` may pass them): a
    candidate's validation replays its minibatch answers, so the demos are evaluated and validated with the 33
    calls; the rewrite with the demos, a new prompt on all nine, is not, and the round stands with the demos."""
    planted = "Answer the question from the context, in a few words."

    def shy_who(call):
        if call.inputs.get("question", "").startswith("Who") and len(call.messages) <= 2:
            return {"answer": "I don't know"}
        return answer(call)

    opt = MemTraceOptimizer.from_models(echo_models(shy_who), attribution="lineage", settings=LoopSettings.of(
        rounds=2, candidates=1, minibatch=9, demos=2, min_val_questions=1, budget=33))
    opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples, valset=examples)
    (first,) = opt.result.rounds
    rule, demos, both = first.candidates
    assert demos.accepted and rule.val_score is None
    assert both.val_score is None and both.why == "not validated: 4 LM calls left, a validation takes at least 9"
    assert opt.result.stop_reason == "budget" and opt.result.lm_calls == 29
    assert "interrupted" not in opt.result.manifest_part()["optimizer"]  # the round is done, not cut short
