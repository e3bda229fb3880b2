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
from memtrace_opt.optimizers.core.evidence import Finding
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS, diagnose, learned_patterns, refine
from memtrace_opt.programs.long_context import LongContextMemory
from memtrace_opt.testing import FakeEngine, Skill, fake_lm
from memtrace_opt.testing.skills import answer, default_skills

CONTEXT = "Odalys: I gave my old kayak to the sailing club last week.\nTeodor: I took up fencing and archery."


def names(*cases: tuple[str, str, str], patterns=PATTERNS) -> list[str]:
    """The patterns found in (gold, answer, shown) cases whose step wrote the answer."""
    found = diagnose([(f"c{i}", gold, answer, shown, answer) for i, (gold, answer, shown) in enumerate(cases)],
                     patterns=patterns)
    return [finding.pattern.name for finding in found]


def test_each_pattern_is_found_in_the_answer_that_shows_it_and_not_in_a_right_one():
    assert names(("Fencing, Archery", "Fencing", CONTEXT)) == ["partial_list"]
    assert names(("Fencing, Archery", "Fencing and Archery", CONTEXT)) == []
    assert names(("19 January, 2031", "7 May 2031", CONTEXT)) == []  # a date with a comma is not a list
    assert names(("The Sunday before 25 May 2031", "2031-05-24", CONTEXT)) == ["date_form"]
    assert names(("2027", "3 years ago", CONTEXT)) == ["date_form"]
    assert names(("The Sunday before 25 May 2031", "26 May 2031", CONTEXT)) == []  # wrong day, right form
    assert names(("2031-05-24", "24 May 2031", CONTEXT)) == ["date_form"]  # named where the gold is in digits
    assert names(("old kayak", "Not mentioned in the conversation", CONTEXT)) == ["declined"]
    assert names(("old kayak", "None", CONTEXT)) == ["declined"]
    assert names(("a red bicycle", "None", CONTEXT)) == []  # the context does not hold it: declining is right
    assert names(("No", "Not mentioned in the conversation", CONTEXT)) == []  # "no" is in any context
    long = "Odalys said that she was thinking about giving something to the club near her home one day soon"
    assert names(("old kayak", long, CONTEXT)) == ["verbose"]
    assert names(("old kayak", "her old kayak, which she gave to the sailing club near her home last week",
                  CONTEXT)) == []


def test_the_most_shown_pattern_comes_first_and_an_upstream_step_is_not_diagnosed():
    found = diagnose([("a", "2027", "last year", "", "last year"), ("b", "2028", "2028-03-01", "", "2028-03-01"),
                      ("c", "Fencing, Archery", "Fencing", "", "Fencing")])
    assert [(f.pattern.name, f.cases) for f in found] == [("date_form", ("a", "b")), ("partial_list", ("c",))]
    # an extraction step whose reply is a list of facts: the answer's shape says nothing about it
    assert diagnose([("a", "2027", "last year", "", '["Teodor got a parrot in 2027."]')]) == []


# invented golds of a training split: dates as "month name, day and year", short phrases, lists with commas
TRAIN_GOLDS = ["March 3, 2030", "April 18, 2029", "June 2030", "a green canoe", "Ilse", "fencing, archery, chess",
               "the harbour market", "2029", "None", "her cousin Bram", "two"]


def test_learned_rules_ask_for_the_training_golds_own_format_shown_on_an_invented_date():
    learned = {p.name: p for p in learned_patterns(TRAIN_GOLDS)}
    assert list(learned) == ["declined", "partial_list", "date_form", "verbose"]
    date_rule = learned["date_form"].rule
    assert 'month name, day and year, as in "October 14, 2031" ("October 2031" when the day is not known)' in date_rule
    assert "2031-10-14" in date_rule and "date" in date_rule  # the other form it must not take
    assert "October 14, 2031" in learned["date_form"].mistake
    assert not any(gold in p.rule or gold in p.mistake for p in learned.values() for gold in TRAIN_GOLDS[:3])
    assert "separated by commas" in learned["partial_list"].rule
    assert "in 3 words or fewer" in learned["verbose"].rule  # the upper quartile of the golds' lengths
    numeric = {p.name: p for p in learned_patterns(["2030-03-03", "2029-04-18", "a canoe"])}
    assert 'year, month and day in digits, as in "2031-10-14"' in numeric["date_form"].rule
    assert "October 14, 2031" not in numeric["date_form"].rule and '"14 October 2031"' in numeric["date_form"].rule


def test_a_pattern_whose_format_no_training_gold_shows_is_not_offered():
    learned = [p.name for p in learned_patterns(["a green canoe", "Ilse", "the harbour market", "None"])]
    assert learned == ["declined", "verbose"]  # no gold names a date or lists items
    assert [p.name for p in learned_patterns([])] == ["declined"]
    no_dates = learned_patterns(["a green canoe", "Ilse"])
    assert names(("2027", "3 years ago", CONTEXT), patterns=no_dates) == []


def test_no_rule_text_holds_a_benchmark_date_or_the_old_constants():
    for golds in (TRAIN_GOLDS, ["7 May 2031", "a kite"], ["05/07/2031", "14/03/2030"], ["2031"], []):
        for pattern in (*learned_patterns(golds), *PATTERNS):
            for text in (pattern.rule, pattern.mistake):
                assert "March 2023" not in text and "2023-03-26" not in text and "2023" not in text


def test_learned_tests_read_the_learned_format():
    named = learned_patterns(["7 May 2031", "8 June 2030", "a kite"])  # dates as "14 October 2031"
    # the gold is in digits, the answer in the training golds' own form: that is no date-form mistake to fix
    assert names(("2031-05-24", "24 May 2031", CONTEXT), patterns=named) == []
    assert names(("2031-05-24", "last week", CONTEXT), patterns=named) == ["date_form"]
    # "verbose" needs an answer longer than the golds' phrases: long golds make a long answer no mistake
    long_golds = ["she took the night train to the coast to see her sister and her two small nephews there"] * 3
    long = "Odalys said that she was thinking about giving something to the club near her home one day soon"
    assert names(("old kayak", long, CONTEXT), patterns=learned_patterns(long_golds)) == []
    assert names(("old kayak", long, CONTEXT), patterns=named) == ["verbose"]


def test_refine_tests_the_findings_again_with_the_learned_patterns():
    cases = [("a", "2031-05-24", "24 May 2031", "", "24 May 2031"), ("b", "2030", "last year", "", "last year"),
             ("c", "Fencing, Archery", "Fencing", "", "Fencing")]
    general = diagnose(cases)
    assert [(f.pattern.name, f.cases) for f in general] == [("date_form", ("a", "b")), ("partial_list", ("c",))]
    learned = learned_patterns(["7 May 2031", "a kite"])  # named dates, no lists
    refined = refine(general, learned)
    assert [(f.pattern.name, f.cases) for f in refined] == [("date_form", ("b",))]
    assert refined[0].pattern.rule == next(p.rule for p in learned if p.name == "date_form")
    assert refine(general, ()) == []
    # a finding without its cases whole (as a test or an earlier record builds it) keeps its case ids
    bare = [Finding(PATTERNS[2], ("x", "y"))]
    assert [(f.pattern.rule, f.cases) for f in refine(bare, learned)] == [(refined[0].pattern.rule, ("x", "y"))]


def echo_models(answer_skill=None) -> Models:
    """The fake models with a reflection LM that only hands the current instruction back, and `answer_skill`
    (if given) as the answer step."""
    echo = [Skill(("rules",), lambda call: {"rules": call.inputs["current_instruction"]}),
            Skill(("new_instruction",), lambda call: {"new_instruction": call.inputs["current_instruction"]})]
    answering = [Skill(("answer",), answer_skill, name="answer")] if answer_skill is not None else []
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=FakeEngine(skills=[*echo, *answering,
                                                                                   *default_skills()]))


def _evidence(instruction: str) -> ProposalEvidence:
    case = OpEvidence("c1", "When did Teodor get his parrot?", "2027", "3 years ago", "...", "3 years ago", "")
    return ProposalEvidence(ANSWER, "long_context.answer", instruction, failures=(case,),
                            findings=tuple(diagnose([("c1", "2027", "3 years ago", "...", "3 years ago")])))


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
    # the rule asks for the training golds' own date form ("12 March 2034": day, month name and year), on an
    # invented date
    assert 'day, month name and year, as in "14 October 2031" ("October 2031" when the day is not known)' in \
        taken.instruction


def test_a_rewrite_that_passes_the_minibatch_beside_demos_is_validated_with_them(examples):
    """The fake answerer answers "Who" questions only with worked examples in its prompt, and resolves "when"
    dates only with "date" in its instruction: the demos fix one question, the diagnosed date rule more, and
    only the two together fix all of them. Joined, they are validated first, and taken: neither part is validated."""
    planted = "Answer the question from the context, in a few words."

    def shy_who(call):
        if call.inputs.get("question", "").startswith("Who") and len(call.messages) <= 2:
            return {"answer": "I don't know"}
        return answer(call)

    models = echo_models(shy_who)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(local_objective=False,
        rounds=1, candidates=1, minibatch=9, demos=2, min_val_questions=1))
    program = with_instruction(LongContextMemory(), ANSWER, planted)
    optimized = opt.compile(program, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    rule, demos, both = first.candidates
    assert rule.origin == "pattern:date_form" and demos.demos and both.origin == "combined"
    assert rule.minibatch_score > demos.minibatch_score  # both beat the planted instruction's minibatch score
    assert rule.val_score is None and rule.why == "not validated: the joined candidate was accepted first"
    assert demos.val_score is None and not demos.accepted
    assert both.accepted and both.val_score > opt.result.baseline_val and both.minibatch_score is None
    assert (both.instruction, both.demos) == (rule.instruction, demos.demos)
    assert instructions_of(optimized)[ANSWER] == rule.instruction
    assert demos_of(optimized)[ANSWER] == demos.demos and first.val_accuracy == both.val_score


def test_a_rewrite_is_validated_alone_when_neither_the_demos_nor_the_two_together_pass(examples):
    """With worked examples shown the fake answerer answers only "What" and "Who" questions: the rewrite with the
    demos gains one question (too few to pass); the date rule alone, validated next, gains three."""
    planted = "Answer the question from the context, in a few words."

    def led_by_examples(call):
        question = call.inputs.get("question", "")
        if len(call.messages) > 2:
            return answer(call) if question.startswith(("What", "Who")) else {"answer": "I don't know"}
        return answer(call) if not question.startswith("Who") else {"answer": "I don't know"}

    models = echo_models(led_by_examples)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(local_objective=False,
        rounds=1, candidates=1, minibatch=9, demos=2))
    optimized = opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples,
                            valset=examples)
    rule, demos, both = opt.result.rounds[0].candidates
    assert not demos.accepted and not both.accepted and both.val_score is not None
    assert rule.origin == "pattern:date_form" and rule.accepted and rule.val_score > both.val_score
    assert instructions_of(optimized)[ANSWER] == rule.instruction and demos_of(optimized)[ANSWER] == []


def test_a_round_the_calls_left_cannot_validate_is_not_started_and_a_larger_budget_starts_it(examples, tmp_path):
    """A candidate's validation takes nine answer calls: with 12 calls left after the baseline the round is not
    started (its reflection calls are not spent either); run again with a larger budget, it runs and takes the date
    rule, without running the baseline again."""
    planted = "Answer the question from the context, in a few words."
    storage = f"sqlite:///{tmp_path / 'study.db'}"

    def run(budget: int) -> MemTraceOptimizer:
        opt = MemTraceOptimizer.from_models(echo_models(), attribution="lineage", storage=storage,
                                            study_name="short", settings=LoopSettings.of(local_objective=False,
                                                rounds=1, candidates=2, minibatch=9, demos=2,
                                                budget=budget))
        opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples, valset=examples)
        return opt

    short = run(21)
    assert short.result.rounds == [] and short.result.lm_calls == 9  # the baseline's 9, nothing after
    assert short.result.stop_reason == "budget" and "interrupted" not in short.result.manifest_part()["optimizer"]
    resumed = run(60)
    first = resumed.result.rounds[0]
    assert first.accepted and next(c for c in first.candidates if c.accepted).origin == "pattern:date_form"
    assert resumed.result.lm_calls_by_role.get("task", 0) < resumed.result.lm_calls - 9 + 1  # no baseline again
    assert resumed.result.lm_calls > 9


def test_every_round_under_a_small_budget_ends_validated_or_says_why(examples, tmp_path):
    """Valset and training set are the same nine questions (as a caller of `compile` may pass them), 33 calls: no
    round the loop starts is cut; each ends with a validated candidate or a recorded outcome."""
    planted = "Answer the question from the context, in a few words."

    def shy_who(call):
        if call.inputs.get("question", "").startswith("Who") and len(call.messages) <= 2:
            return {"answer": "I don't know"}
        return answer(call)

    opt = MemTraceOptimizer.from_models(echo_models(shy_who), attribution="lineage", settings=LoopSettings.of(local_objective=False,
        rounds=2, candidates=1, minibatch=9, demos=2, min_val_questions=1, budget=33))
    opt.compile(with_instruction(LongContextMemory(), ANSWER, planted), trainset=examples, valset=examples)
    assert opt.result.rounds and opt.result.lm_calls <= 33
    assert "interrupted" not in opt.result.manifest_part()["optimizer"]
    assert all(r.outcome and (r.accepted or any(c.val_score is not None for c in r.candidates) or
                              "accepted" not in r.outcome) for r in opt.result.rounds)
    assert opt.result.rounds[0].accepted
