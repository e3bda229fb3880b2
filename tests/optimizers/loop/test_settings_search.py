"""The settings search: the blamed op's declared settings, searched with Optuna on the settings objective."""

from __future__ import annotations

from collections import Counter

import pytest
from optfixtures import ANSWER, EXTRACT, FIXED, make_models

from memtrace_opt.optimizers import (
    LoopSettings,
    MemTraceOptimizer,
    load_optimized,
    save_program,
    with_instruction,
)
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
from memtrace_opt.optimizers.evaluation.examples import case_refs
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.gates.local_objective import DictReplyBook
from memtrace_opt.optimizers.gates.settings import SettingsGate, SettingsObjective
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory
from memtrace_opt.testing import Skill
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import OpEvent

CAPACITY = 2  # facts an extraction call writes at most, whatever its instruction says: a small model's limit


def useless(call):
    return {"new_instruction": "Write short notes about the people. Write down every detail, carefully."}


def with_limited_extractor(engine) -> None:
    """A planted fault no prompt fixes: each extraction call keeps only its first facts."""
    facts = next(s for s in default_skills() if s.outputs == ("facts",))

    def extract(call):
        return {"facts": list(facts.fn(call)["facts"])[:CAPACITY]}

    engine.skills[:] = [Skill(("facts",), extract, name="facts"), *engine.skills]


@pytest.fixture
def wide():
    """Mem0 keeping dates (FIXED) but extracting from windows of 4 turns: each toy session is one call."""
    return with_instruction(Mem0Memory(Mem0Config(window_turns=4)), EXTRACT, FIXED)


def loop(models, **values) -> MemTraceOptimizer:
    settings = {"rounds": 1, "candidates": 1, "minibatch": 9, "demos": 1, "min_val_questions": 1, "repairs": 0,
                **values}
    return MemTraceOptimizer.from_models(models, settings=LoopSettings.of(**settings), attribution="lineage")


def test_a_window_too_large_is_fixed_by_the_settings_search_and_no_prompt(wide, examples, tmp_path):
    models, engine = make_models(reflection=useless, rules=lambda call: {"rules": "Be thorough."})
    with_limited_extractor(engine)
    opt = loop(models)
    optimized = opt.compile(wide, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    assert first.chosen_predictor == EXTRACT
    taken = next(c for c in first.candidates if c.accepted)
    assert taken.origin == "settings" and taken.settings["window_turns"] < 4
    assert first.settings_changed == {"window_turns": [4, taken.settings["window_turns"]]}
    assert optimized.config.window_turns == taken.settings["window_turns"]
    assert all(c.val_score is None or c.origin == "settings" for c in first.candidates)  # no prompt got that far
    # program.json carries the new settings; the program loads with them
    path = save_program(optimized, tmp_path / "program.json")
    assert load_optimized(path).config.window_turns == taken.settings["window_turns"]


def test_a_candidate_over_the_cost_limit_is_rejected(wide, examples):
    models, engine = make_models()
    with_limited_extractor(engine)
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    objective = SettingsObjective(EXTRACT, evaluator, case_refs(examples), wide, DictReplyBook(), cost_limit=1.2)
    gate = SettingsGate(objective, margin=1)
    objective.seed()
    before = len(engine.calls_for("facts"))
    score, decision = gate.check(wide, Candidate.of_settings(EXTRACT, {"window_turns": 1}))
    assert score.over_cost and "over the cost limit" in decision.why and not decision.ok  # too many calls...
    assert len(engine.calls_for("facts")) == before and score.lm_calls == 0  # ...known from a dry run, no LM call
    assert score.cost["calls_per_conversation"] > 1.2 * score.seed_cost["calls_per_conversation"]
    narrow, ok = gate.check(wide, Candidate.of_settings(EXTRACT, {"window_turns": 2}))
    assert not narrow.over_cost and ok.ok and narrow.cost["calls_per_conversation"] > narrow.seed_cost[
        "calls_per_conversation"]


class Killed(BaseException):
    """A kill of the process, in the middle of the settings search."""


def test_a_resumed_round_proposes_the_same_settings(wide, examples, tmp_path, monkeypatch):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    scored: list[tuple[int, int]] = []  # (window_turns, context_turns) of each scoped run of a candidate
    original = SettingsObjective._carried

    def counted(self, program):
        settings = (program.config.window_turns, program.config.context_turns)
        if settings != (4, 0):  # the seed's own run is not a candidate's
            if len(scored) == 2 and not killed:
                killed.append(True)
                raise Killed()
            scored.append(settings)
        return original(self, program)

    killed: list[bool] = []
    monkeypatch.setattr(SettingsObjective, "_carried", counted)

    def settings_candidates():
        models, engine = make_models(reflection=useless)
        with_limited_extractor(engine)
        opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(
            rounds=1, candidates=1, minibatch=9, demos=0, repairs=0, min_val_questions=1), attribution="lineage",
            storage=storage, study_name="settings-resume")
        opt.compile(wide, trainset=examples, valset=examples)
        return [c.settings for c in opt.result.rounds[0].candidates if c.settings], engine

    with pytest.raises(Killed):
        settings_candidates()  # killed in the search, after two settings were scored
    tried_before = list(scored)
    first, _ = settings_candidates()
    # the two settings scored before the kill came back from the round's settings study, not scored again
    assert first and all(scored.count(s) == 1 for s in tried_before)
    again, engine = settings_candidates()
    assert again == first and not engine.calls_for("facts")  # the recorded round: the same, nothing re-run


def test_settings_over_the_cost_limit_cost_no_trial(wide, examples, tmp_path, monkeypatch):
    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    scored: list[int] = []
    original = SettingsObjective._carried

    def counted(self, program):
        if program.config.window_turns != 4:
            scored.append(program.config.window_turns)
        return original(self, program)

    monkeypatch.setattr(SettingsObjective, "_carried", counted)
    models, engine = make_models(reflection=useless)
    with_limited_extractor(engine)
    opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(
        rounds=1, candidates=1, minibatch=9, demos=0, repairs=0, min_val_questions=1, settings_trials=2,
        cost_limit=1.01), attribution="lineage", storage=storage, study_name="priced")
    opt.compile(wide, trainset=examples, valset=examples)
    name = next(s.study_name for s in optuna.get_all_study_summaries(storage) if "~settings:" in s.study_name)
    trials = optuna.load_study(study_name=name, storage=storage).trials
    over = [t for t in trials if t.user_attrs.get("over_cost")]
    assert over and all(t.params["window_turns"] < 4 for t in over)  # more calls than the seed's, priced only
    assert len(trials) - len(over) == 2  # two settings scored, however many were priced first
    assert all(w > 4 for w in scored if w != 4) and len(scored) <= 2  # only settings within the limit ran live


def test_the_seeds_scoped_run_says_what_a_trial_may_run_again(wide, examples):
    models, engine = make_models()
    with_limited_extractor(engine)
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    objective = SettingsObjective(EXTRACT, evaluator, case_refs(examples), wide, DictReplyBook())
    assert not objective.seeded and objective.in_scope == {}
    objective.seed()
    full = evaluator.evaluate(wide, case_refs(examples))
    every = Counter(e.predictor for t in full.traces.values() for e in t.events if isinstance(e, OpEvent) and e.predictor)
    assert objective.seeded and set(objective.in_scope) == {EXTRACT}  # the answers are skipped for an extractor
    assert 0 < objective.in_scope[EXTRACT] <= every[EXTRACT] and every[ANSWER] > 0


def test_a_settings_trial_is_priced_by_what_the_seeds_scoped_run_ran(wide, examples):
    models, engine = make_models(reflection=useless)
    with_limited_extractor(engine)
    opt = loop(models, settings_trials=2)
    opt.compile(wide, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    phase = next(p for p in first.phases if p.phase.value == "settings")
    tried = [c for c in first.candidates if c.origin == "settings"]
    assert tried and phase.estimated_calls > 0
    # two trials and the seed's run, each priced by the calls the seed's scoped run made in scope
    assert phase.calls + phase.cached <= phase.estimated_calls
