"""Repair-driven rounds with the fake LM: a planted extraction fault fixed through a repair demo where no
training case is right; a write-path candidate's minibatch replayed in scope; the ablations' choices."""

from __future__ import annotations

from optfixtures import ANSWER, DECIDE, EXTRACT, make_models

from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, instructions_of
from memtrace_opt.optimizers.comparison.compare import ablation
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.loop.selection import RoundOutcome

DATED = ("kitten-when", "marathon-when", "louvre-when", "porto-when")


def useless(call):
    return {"new_instruction": "Write short notes about the people. Skip anything about time."}


def no_rules(call):
    return {"rules": "Be brief."}


def _loop(models, **settings):
    values = {"rounds": 2, "candidates": 1, "minibatch": 4, "demos": 0, "min_val_questions": 2, **settings}
    return MemTraceOptimizer.from_models(models, settings=LoopSettings.of(**values), attribution="lineage")


def test_a_planted_extraction_fault_is_fixed_through_a_repair_demo_with_no_training_case_right(planted, examples):
    models, engine = make_models(reflection=useless, rules=no_rules)
    train = [e for e in examples if e.question.question_id.split(":")[-1].removeprefix("q-") in DATED]
    opt = _loop(models)
    optimized = opt.compile(planted, trainset=train, valset=examples)
    first = opt.result.rounds[0]
    assert first.chosen_predictor == EXTRACT and first.repairs["kept"] >= 1
    taken = next(c for c in first.candidates if c.accepted)
    assert taken.origin == "repair" and taken.local["targets"] >= 1 and taken.local["fixed"] >= 1
    assert instructions_of(optimized) == instructions_of(planted)  # the instruction is kept: the demos fixed it
    assert demos_of(optimized)[EXTRACT] and not demos_of(optimized)[ANSWER] and not demos_of(optimized)[DECIDE]
    assert first.val_accuracy > opt.result.baseline_val
    # the repaired call's target was shown to the reflection LM beside what the call produced
    shown = engine.calls_for("rules")[0].inputs["failed_cases"]
    assert "What it should have produced" in shown and "(13 March, 2034)" in shown


def test_with_repairs_off_no_repair_demo_is_offered(planted, examples):
    models, _ = make_models(reflection=useless, rules=no_rules)
    opt = _loop(models, repairs=0, rounds=1)
    opt.compile(planted, trainset=examples, valset=examples)
    assert all(c.origin != "repair" for r in opt.result.rounds for c in r.candidates)
    assert all(r.repairs is None for r in opt.result.rounds)


def test_an_accepted_step_still_changes_exactly_one_predictor(planted, examples):
    models, _ = make_models()
    opt = _loop(models, rounds=3, candidates=2, demos=2)
    optimized = opt.compile(planted, trainset=examples, valset=examples)
    before, after = planted, optimized
    changed = [n for n in instructions_of(before)
               if instructions_of(before)[n] != instructions_of(after)[n] or demos_of(before)[n] != demos_of(after)[n]]
    assert len(changed) == sum(r.accepted for r in opt.result.rounds) == 1


def test_the_scoped_minibatch_replay_reruns_only_the_evidence_path_and_answers_as_a_full_one(planted, examples):
    runs = {}
    for scoped in (True, False):
        models, _ = make_models()
        opt = _loop(models, rounds=1, candidates=1, repairs=0, scoped_replay=scoped, minibatch=2, local_objective=False)
        opt.compile(planted, trainset=examples, valset=examples)
        runs[scoped] = opt.result.rounds[0]
    scoped, full = runs[True], runs[False]
    assert scoped.chosen_predictor == full.chosen_predictor == EXTRACT
    assert any(c.minibatch_score is not None for c in scoped.candidates)
    for s, f in zip(scoped.candidates, full.candidates, strict=True):
        if s.minibatch_score is None:
            continue
        assert s.minibatch_score == f.minibatch_score  # the change cannot reach the other windows' answers
        mine, theirs = s.replayed["minibatch"], f.replayed["minibatch"]
        assert (mine["scope"], theirs["scope"]) == ("evidence", "full")
        assert mine["served"] > 0 and theirs["served"] == 0
        extract_calls = {"mem0.extract_facts"}
        assert sum(v for k, v in mine["rerun_by_op"].items() if k in extract_calls) < \
            sum(v for k, v in theirs["rerun_by_op"].items() if k in extract_calls)
        if s.val_score is not None:
            assert s.replayed["val"]["scope"] == "full"


def test_each_ablation_picks_predictors_as_it_says():
    order = (EXTRACT, DECIDE, ANSWER)
    blame = {ANSWER: 3, EXTRACT: 1}
    robin = ablation("memtrace_roundrobin", order)["selector"]
    history: list[RoundOutcome] = []
    picked = []
    for _ in range(4):
        picked.append(robin.select(blame, history))
        history.append(RoundOutcome(picked[-1], False))
    assert picked == [EXTRACT, DECIDE, ANSWER, EXTRACT]  # GEPA's order, blame or not
    every = ablation("memtrace_all", order)
    assert every["selector"].select(blame, []) == EXTRACT and type(every["routing"]).__name__ == "EveryPredictor"
    assert ablation("memtrace", order) == {} and ablation("memtrace_norepair", order) == {}
