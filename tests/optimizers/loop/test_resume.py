"""A killed optimization resumes from its Optuna study without repeating finished work."""

from __future__ import annotations

import pytest
from optfixtures import EXTRACT, FIX, add_rules, make_models, reflect

from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, StudyLedger, instructions_of
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.testing import FakeCall
from memtrace_opt.testing.skills import extract_facts


class Killed(BaseException):  # noqa: N818 - stands in for SIGKILL: nothing catches it
    pass


SETTINGS = LoopSettings.of(rounds=4, candidates=2, minibatch=5, patience=3, demos=0, repairs=0)


def run(models, planted, examples, storage, settings=SETTINGS):
    opt = MemTraceOptimizer.from_models(models, settings=settings, attribution="lineage", storage=storage,
                                        study_name="resume-test")
    return opt, opt.compile(planted, trainset=examples, valset=examples)


def keys(storage: str) -> list[str]:
    ledger = StudyLedger.open(storage=storage, study_name="resume-test")
    return [t.user_attrs["key"] for t in ledger.study.get_trials() if t.state.name in ("COMPLETE", "PRUNED")]


def test_resume_after_a_kill_between_rounds(tmp_path, planted, examples):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    calls = {"n": 0}

    def dies_on_third(call: FakeCall) -> dict:
        calls["n"] += 1
        if calls["n"] == 3:  # round 1 asked twice; round 2's first proposal kills the run
            raise Killed()
        return reflect(call) if "new_instruction" in call.output_fields else add_rules(call)

    models, _ = make_models(dies_on_third, rules=dies_on_third)
    with pytest.raises(Killed):
        run(models, planted, examples, storage)
    finished_before = keys(storage)
    assert len(finished_before) == 2  # round 1's two candidates

    models2, engine2 = make_models()
    opt, optimized = run(models2, planted, examples, storage)
    finished_after = keys(storage)
    assert len(finished_after) == len(set(finished_after))  # no candidate evaluated twice
    assert set(finished_before) <= set(finished_after)
    round_one = opt.result.rounds[0]
    assert round_one.accepted and round_one.chosen_predictor == EXTRACT
    assert instructions_of(optimized)[EXTRACT].endswith(FIX.strip())
    # round 1 came from the study: the resumed run asked the reflection LM only for later rounds
    asked = engine2.counts["reflect"] + engine2.counts["add-rules"]
    assert asked == 2 * sum(1 for r in opt.result.rounds[1:] if r.candidates)


def as_version_1(plan: dict) -> dict:
    """`round:N` as a release before typed candidates wrote it: proposal texts, their origins, the demos."""
    old = {k: v for k, v in plan.items() if k not in ("schema_version", "candidates")}
    old["proposals"] = [c["instruction"] for c in plan["candidates"] if "demos" not in c]
    old["proposal_origins"] = [c["origin"] for c in plan["candidates"] if "demos" not in c]
    old["demos"] = next((c["demos"] for c in plan["candidates"] if "demos" in c), [])
    return old


@pytest.mark.parametrize("old_plan", [False, True], ids=["plan", "plan-written-by-an-earlier-release"])
def test_resume_after_a_kill_mid_round_reuses_finished_minibatch_scores(tmp_path, planted, examples, monkeypatch,
                                                                        old_plan):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    settings = SETTINGS.with_values({"local_check": False, "local_objective": False})  # the kill comes in candidate 2's minibatch run

    def dies_on_second_candidate(call: FakeCall) -> dict:
        if "Skip anything about time" in call.instruction:
            raise Killed()
        return extract_facts(call)

    models, engine = make_models()
    engine.skills.insert(0, type(engine.skills[0])(outputs=("facts",), fn=dies_on_second_candidate, name="dies"))
    with pytest.raises(Killed):
        run(models, planted, examples, storage, settings)
    ledger = StudyLedger.open(storage=storage, study_name="resume-test")
    if old_plan:
        ledger.put("round:1", as_version_1(ledger.get("round:1")))
        assert "candidates" not in ledger.get("round:1")
    origins = [c["origin"] for c in ledger.get("round:1").get("candidates") or []] or ledger.get("round:1")[
        "proposal_origins"]

    evaluations: list[int] = []
    original = CachedEvaluator.evaluate

    def counting(self, program, cases, **options):
        evaluations.append(len(cases))
        return original(self, program, cases, **options)

    monkeypatch.setattr(CachedEvaluator, "evaluate", counting)
    models2, _ = make_models()
    seen = []
    opt = MemTraceOptimizer.from_models(models2, settings=settings, attribution="lineage", storage=storage,
                                        study_name="resume-test", on_round=lambda r: seen.append(len(evaluations)))
    opt.compile(planted, trainset=examples, valset=examples)
    # round 1 resumed: its plan and candidate 1's minibatch score came from the study; only candidate 2's
    # minibatch run and the best candidate's validation ran again (no baseline, no plan, no candidate 1)
    assert seen[0] == 2
    assert evaluations[:2] == [5, len(examples)]
    assert opt.result.rounds[0].accepted
    assert [c.origin for c in opt.result.rounds[0].candidates] == origins  # each proposal keeps where it came from
