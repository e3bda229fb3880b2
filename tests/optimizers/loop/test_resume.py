"""A killed optimization resumes from its study and its reply cache without paying twice for any LM call."""

from __future__ import annotations

import pytest
from optfixtures import EXTRACT, FIX, add_rules, make_models, reflect

from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, StudyLedger, instructions_of
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


def test_resume_after_a_kill_mid_round_pays_for_no_call_twice(tmp_path, planted, examples):
    """Killed in candidate 2's minibatch run and resumed with the study and the reply cache: the resumed run sends the
    model no request the killed run had sent, and the two together send what one uninterrupted run sends."""
    settings = SETTINGS.with_values({"local_check": False, "local_objective": False})

    def dies_on_second_candidate(call: FakeCall) -> dict:
        if "Skip anything about time" in call.instruction:
            raise Killed()
        return extract_facts(call)

    def sent(engine) -> list[str]:
        return [repr(c.messages) for c in engine.calls]

    whole_models, whole = make_models()
    MemTraceOptimizer.from_models(whole_models, settings=settings, attribution="lineage").compile(
        planted, trainset=examples, valset=examples)

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    models, engine = make_models()
    engine.skills.insert(0, type(engine.skills[0])(outputs=("facts",), fn=dies_on_second_candidate, name="dies"))
    with pytest.raises(Killed):
        MemTraceOptimizer.from_models(models, settings=settings, attribution="lineage", storage=storage,
                                      study_name="resume-test", replies=ReplyCache(tmp_path / "replies.sqlite")
                                      ).compile(planted, trainset=examples, valset=examples)
    before = sent(engine)[:-1]  # the call that died was never answered: the resumed run sends it again
    models2, engine2 = make_models()
    opt = MemTraceOptimizer.from_models(models2, settings=settings, attribution="lineage", storage=storage,
                                        study_name="resume-test", replies=ReplyCache(tmp_path / "replies.sqlite"))
    opt.compile(planted, trainset=examples, valset=examples)
    after = sent(engine2)
    assert before and not set(before) & set(after)
    assert sorted(set(before) | set(after)) == sorted(set(sent(whole)))
    assert opt.result.rounds[0].accepted
