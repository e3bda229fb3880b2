"""The local check: a candidate for an upstream predictor is re-run on the blamed calls before any replay."""

from __future__ import annotations

import dataclasses
import json

import dspy
import pytest
from optfixtures import ANSWER, BAD_EXTRACT, EXTRACT, FIXED, make_models

from memtrace_opt.attribution import GraphView, Verdict
from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator, LoopSettings, MemTraceOptimizer, case_refs
from memtrace_opt.optimizers.evaluation.blame import attribute_failures
from memtrace_opt.optimizers.evaluation.carry import carries
from memtrace_opt.optimizers.gates.local_check import LocalCase, check_candidate, local_cases, reply_parts

USELESS = "Write short notes about the people. Skip anything about time."


@pytest.fixture
def traced(planted, examples):
    """The planted program's run on the toy conversation, its failures blamed by lineage."""
    models, engine = make_models()
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    evaluation = evaluator.evaluate(planted, case_refs(examples))
    predictors = [n for n, _ in planted.named_predictors()]
    with dspy.context(lm=models.task):
        blame = attribute_failures(evaluation, evaluation.failed(), method="lineage", predictors=predictors)
    return models, engine, evaluator, evaluation, blame


def test_carries_needs_every_content_word_of_the_gold_answer():
    assert carries("12 March 2034", "Odalys joined a rowing club on 12 March 2034.")
    assert not carries("12 March 2034", "She went on 13 March 2034.")  # a garbled date is not the answer
    assert carries("They sound joyful", "Wenna and Bartek sound cheerful, full of joy.")  # "they" carries nothing
    assert not carries('"Harbour Lights"', "They walked to the harbour at noon.")  # one common word is not it
    assert carries("Ferry timetables", "Teodor checked a ferry timetable.")  # stemmed
    assert carries("it is", "it is")  # only function words: all of them count
    assert not carries("", "anything")  # a gold answer without tokens is never checked


def test_cases_are_the_blamed_extraction_calls_and_calls_of_correct_cases(traced):
    _, _, evaluator, evaluation, blame = traced
    cases = local_cases(EXTRACT, evaluation, blame, evaluator.memo)
    blamed = [c for c in cases if c.blamed]
    assert blamed and len(blamed) <= 3 and {c.case_id for c in blamed} <= {c.case_id for c in evaluation.failed()}
    assert all("[[ ## new_messages ## ]]" in c.prompt and "facts" in c.response for c in blamed)
    correct = [c for c in cases if not c.blamed]
    assert correct and {c.case_id for c in correct} <= {c.case_id for c in evaluation.passed()}
    assert all(carries(c.gold, c.response) for c in correct)  # the call that carried the answer is the one kept
    assert [LocalCase.from_dict(c.to_dict()) for c in cases] == cases


def test_the_answer_predictor_is_not_checked_locally(traced):
    _, _, evaluator, evaluation, blame = traced
    case = evaluation.failed()[0]
    op = GraphView(evaluation.traces[case.conversation_key].graph()).answer_op(case.case_id)
    blame.by_predictor = {ANSWER: [Verdict(case.case_id, "scripted", "ResponseError", op, "mem0.answer", ANSWER,
                                           "", 1.0)]}
    assert op is not None and local_cases(ANSWER, evaluation, blame, evaluator.memo) == []


def test_a_fix_passes_and_a_useless_rewrite_is_rejected_for_a_few_calls(traced, planted):
    models, engine, evaluator, evaluation, blame = traced
    cases = local_cases(EXTRACT, evaluation, blame, evaluator.memo)
    blamed = sum(c.blamed for c in cases)
    prompts = len({c.prompt for c in cases if c.blamed})  # cases blamed on one call share its re-run
    with dspy.context(lm=models.task):
        good = check_candidate(planted, EXTRACT, FIXED, cases, models.task)
        engine.calls.clear()
        bad = check_candidate(planted, EXTRACT, USELESS, cases, models.task)
    assert good.passed and good.fixed == good.blamed == blamed and good.broken == 0 and good.kept >= 1
    assert not bad.passed and bad.fixed == 0 and bad.lm_calls == prompts
    assert bad.why.startswith("rejected by the local check: 0 of")
    assert len(engine.calls) == prompts and all(USELESS in c.instruction for c in engine.calls)
    assert not check_candidate(planted, EXTRACT, BAD_EXTRACT, cases, models.task).passed  # the current one


def test_a_reply_that_does_not_parse_carries_nothing(traced, planted):
    _, _, evaluator, evaluation, blame = traced
    cases = local_cases(EXTRACT, evaluation, blame, evaluator.memo)

    class Garbage(dspy.BaseLM):
        def __init__(self) -> None:
            super().__init__(model="garbage")

        def __call__(self, *args, **kwargs):
            return ["no fields at all"]

    result = check_candidate(planted, EXTRACT, FIXED, cases, Garbage())
    assert result.fixed == 0 and not result.passed and result.lm_calls == len({c.prompt for c in cases if c.blamed})


def test_in_the_loop_a_rejected_candidate_never_replays_the_write_path(planted, examples, tmp_path):
    runs = {}
    for check in (True, False):
        models, engine = make_models()
        settings = LoopSettings.of(local_objective=False, rounds=1, candidates=2, minibatch=5, local_check=check, repairs=0)
        opt = MemTraceOptimizer.from_models(models, settings=settings, attribution="lineage",
                                            storage=f"sqlite:///{tmp_path / f'{check}.db'}")
        opt.compile(planted, trainset=examples, valset=examples)
        plan = opt_plan(opt)
        runs[check] = (opt.result.rounds[0], [c for c in engine.calls if USELESS in c.instruction], plan)
    (checked, useless, plan), (plain, plain_useless, _) = runs[True], runs[False]
    by_text = {c.instruction: c for c in checked.candidates}
    assert by_text[USELESS].minibatch_score is None and by_text[USELESS].why.startswith("rejected by the local")
    assert by_text[USELESS].local["fixed"] == 0 and by_text[FIXED].local["fixed"] >= 1
    assert checked.accepted and plain.accepted  # the fix goes through either way
    assert all(c.local is None for c in plain.candidates)
    # with the check, the useless rewrite saw only the blamed calls' messages; without it, the whole write path
    blamed = {c["prompt"].split("[[ ## new_messages ## ]]")[1] for c in plan["local_cases"] if c["blamed"]}
    assert len(useless) == by_text[USELESS].local["lm_calls"] == len(blamed)
    assert {c.inputs["new_messages"] for c in useless} == {m.split("\n\n")[0].strip() for m in blamed}
    assert all(c.max_tokens == 320 for c in useless)  # under the op's own reply cap
    plain_useless_record = next(c for c in plain.candidates if c.instruction == USELESS)
    assert plain_useless_record.minibatch_score is not None  # without the check it went through the replay
    assert len(plain_useless) >= len(useless)


def opt_plan(opt: MemTraceOptimizer) -> dict:
    from memtrace_opt.optimizers.loop.study import StudyLedger

    ledger = StudyLedger.open(storage=opt.storage, study_name=opt.result.study_name)
    return ledger.get("round:1")


def test_a_fact_list_carries_the_answer_only_in_one_fact_about_whom_the_question_names():
    case = LocalCase("q", "12 March 2034", "prompt", "reply", True, "When did Alice adopt a kitten?")
    together = ["Alice adopted a kitten.", "The weather was fine on 12 March 2034."]
    assert case.carried_by(["Alice adopted a kitten on 12 March 2034."])
    assert not case.carried_by(together)  # the words reach the answer only read together: attribution's test
    assert carries(case.gold, " ".join(together))  # which every-word-anywhere would pass
    legacy = LocalCase.from_dict({k: v for k, v in case.to_dict().items() if k != "question"})
    assert legacy.question == "" and legacy.carried_by(together)  # a plan recorded before: the old test


def test_a_blamed_call_whose_facts_hold_the_answer_only_together_is_re_run(traced, planted):
    models, engine, evaluator, evaluation, blame = traced
    case = next(c for c in local_cases(EXTRACT, evaluation, blame, evaluator.memo) if c.blamed)
    facts = [f"{case.question.rstrip('?')}.", f"Something happened on {case.gold}."]  # name, answer: apart
    split = dataclasses.replace(case, response="[[ ## facts ## ]]\n" + json.dumps(facts) + "\n\n[[ ## completed ## ]]")
    assert carries(split.gold, " ".join(facts)) and not split.carried_by(facts)
    assert reply_parts(dspy.ChatAdapter(), dict(planted.named_predictors())[EXTRACT].signature,
                       split.response) == facts  # one part per fact, as the graph holds them
    with dspy.context(lm=models.task):
        result = check_candidate(planted, EXTRACT, FIXED, [split], models.task)
    assert (result.blamed, result.fixed, result.lm_calls) == (1, 1, 1)  # checked, not waved through to the replay
