"""A round the budget cuts short keeps what it had found: the blame, the chosen predictor, the repairs, the local set,
the phase it was cut in and what each phase it reached cost; the closing lines say so. The clock is the budget's own,
moved past the deadline at a chosen step, so the cut falls there on every machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from optfixtures import ANSWER, EXTRACT, add_rules, make_models, reflect

from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer
from memtrace_opt.optimizers.closing import closing_lines
from memtrace_opt.optimizers.loop import engine as engine_module
from memtrace_opt.optimizers.loop import steps
from memtrace_opt.optimizers.loop.engine import Engine
from memtrace_opt.optimizers.loop.records import OptimizationResult, RoundPhase, RoundPlan, RoundRecord
from memtrace_opt.optimizers.loop.study import StudyLedger

HOUR = 3600.0


class Clock:
    """`time` for the budget module: the real monotonic clock until `run_out()`, then a day later."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def run_out(self) -> None:
        self.ahead = 24 * HOUR


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("memtrace_opt.optimizers.core.budget.time", clock)
    return clock


def loop(models, **values) -> MemTraceOptimizer:
    settings = {"rounds": 2, "candidates": 2, "minibatch": 4, "demos": 0, "min_val_questions": 1,
                "time_budget": HOUR, **values}
    return MemTraceOptimizer.from_models(models, settings=LoopSettings.of(**settings), attribution="lineage")


def cut_of(opt: MemTraceOptimizer) -> dict:
    return opt.result.manifest_part()["optimizer"]["interrupted"]


def closing(opt: MemTraceOptimizer) -> list[str]:
    manifest = {**opt.result.manifest_part(), "seconds": 1.0}
    return closing_lines(manifest, Path("run"), report_written=True)


def test_a_time_budget_spent_while_proposing_keeps_the_blame_the_repairs_and_the_local_set(planted, examples, clock):
    seen = []

    def reflect_then_run_out(call):  # the first proposal is written, then the clock runs out: the next call is cut
        seen.append(call)
        clock.run_out()
        return add_rules(call) if "rules" in call.output_fields else reflect(call)

    models, _ = make_models(reflection=reflect_then_run_out, rules=reflect_then_run_out)
    opt = loop(models)
    opt.compile(planted, trainset=examples, valset=examples)
    assert opt.result.stop_reason == "time" and opt.result.rounds == [] and len(seen) == 1
    cut = cut_of(opt)
    assert cut["round"] == 1 and cut["phase"] == "proposals" and cut["why"] == "cut short: the time budget is spent"
    assert cut["chosen_predictor"] == EXTRACT and cut["blame_counts"][EXTRACT] >= 1
    assert cut["blame_counts"] == dict(sorted(cut["blame_counts"].items(), key=lambda kv: -kv[1]))
    assert "not_fixable" in cut and "findings" in cut
    assert cut["repairs"]["tried"] >= 1 and cut["repairs"]["confirmed"] == cut["repairs"]["kept"]
    assert cut["local_set"]["predictor"] == EXTRACT and cut["local_set"]["targets"] >= 1
    assert cut["lm_calls"] >= len(seen) + cut["repairs"]["lm_calls"] and cut["seconds"] > 0
    assert cut["candidates"] == []  # no plan recorded: nothing of its candidates to show
    assert [p["phase"] for p in cut["phases"]] == ["plan", "local set", "repairs", "proposals"]

    blamed = ", ".join(f"{name} {n}" for name, n in cut["blame_counts"].items())
    line = next(line for line in closing(opt) if line.startswith("round 1 cut short"))
    assert line.startswith(f"round 1 cut short while proposing (the time budget; {cut['seconds']:.0f} s and "
                           f"{cut['lm_calls']} LM calls into it): blamed {blamed}; chose {EXTRACT}")
    assert f"repairs: {cut['repairs']['tried']} tried, {cut['repairs']['confirmed']} confirmed" in line
    local = cut["local_set"]
    assert f"local set {local['calls']} calls / {local['targets']} targets, seed carries {local['seed_carried']}" in line


def run_out_before(monkeypatch, clock, owner, step: str) -> None:
    """The clock runs out as the round calls `owner.<step>`; the step itself still runs."""
    real = getattr(owner, step)

    def run_out_then_step(*args, **kwargs):
        clock.run_out()
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, step, run_out_then_step)


def test_a_time_budget_spent_while_repairing_keeps_the_blame_and_the_chosen_predictor(planted, examples, clock,
                                                                                        monkeypatch):
    run_out_before(monkeypatch, clock, steps, "confirm_repairs")
    models, engine = make_models()
    opt = loop(models)
    opt.compile(planted, trainset=examples, valset=examples)
    cut = cut_of(opt)
    assert cut["phase"] == "repairs" and cut["chosen_predictor"] == EXTRACT and cut["blame_counts"][EXTRACT] >= 1
    assert "repairs" not in cut and cut["findings"] == [] and cut["local_set"]["calls"] >= 1  # the local set comes first
    assert engine.calls_for("rules") == [] and engine.calls_for("new_instruction") == []
    line = next(line for line in closing(opt) if line.startswith("round 1 cut short"))
    assert line.startswith("round 1 cut short while repairing (the time budget;") and f"chose {EXTRACT}" in line
    assert "repairs:" not in line and "local set" in line


def test_a_cut_before_attribution_ends_records_what_it_has(planted, examples, clock, monkeypatch):
    run_out_before(monkeypatch, clock, engine_module, "attribute_failures")
    models, _ = make_models()
    opt = MemTraceOptimizer.from_models(models, attribution="graphtrace", settings=LoopSettings.of(
        rounds=2, candidates=2, minibatch=4, time_budget=HOUR))  # graphtrace asks the attributor LM
    opt.compile(planted, trainset=examples, valset=examples)
    cut = cut_of(opt)
    assert cut["phase"] == "plan" and cut["chosen_predictor"] is None and cut["candidates"] == []
    assert cut["blame_counts"] == {} and not {"repairs", "local_set"} & set(cut)
    assert RoundRecord.from_dict(cut).to_dict() == cut
    lines = closing(opt)
    assert lines[0] == "blamed: no round finished (the round cut short says what it found)"
    assert lines[1].startswith("round 1 cut short while tracing and attributing (the time budget;")
    assert lines[1].endswith("): nothing attributed yet")


def test_a_cut_among_the_candidates_names_its_phase_and_keeps_the_plan(planted, examples, clock, monkeypatch,
                                                                         tmp_path):
    plan = Engine._record_plan

    def plan_then_run_out(*args, **kwargs):  # the plan is recorded, then no call is left for its candidates
        recorded = plan(*args, **kwargs)
        clock.run_out()
        return recorded

    monkeypatch.setattr(Engine, "_record_plan", plan_then_run_out)
    models, _ = make_models()
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", storage=storage, settings=LoopSettings.of(
        rounds=2, candidates=2, minibatch=4, demos=0, time_budget=HOUR))
    opt.compile(planted, trainset=examples, valset=examples)
    cut = cut_of(opt)
    stored = RoundPlan.from_dict(StudyLedger.open(storage=storage, study_name=opt.result.study_name).get("round:1"))
    assert cut["phase"] == "candidates" and cut["chosen_predictor"] == stored.chosen_predictor == EXTRACT
    assert cut["blame_counts"] == dict(stored.blame_counts) and cut["repairs"] == dict(stored.repair_counts)
    assert len(cut["candidates"]) == len(stored.candidates) >= 1
    assert all(c["minibatch_score"] is None and "local" not in c for c in cut["candidates"])
    assert all(c["why"] == "not scored: the time budget is spent" for c in cut["candidates"])


def test_the_record_round_trips_and_reaches_the_result_typed():
    cut = RoundRecord(2, {EXTRACT: 3, ANSWER: 1}, {"mem0.apply": 1}, EXTRACT, lm_calls=41, seconds=1803.456,
                      findings=[{"pattern": "date_form", "cases": ["a"]}],
                      repairs={"tried": 3, "not_confirmed": 2, "kept": 1, "confirmed": 1, "lm_calls": 25},
                      cut={"phase": RoundPhase.REPAIRS.value, "why": "cut short: the time budget is spent"})
    data = cut.to_dict()
    assert data["phase"] == "repairs" and data["seconds"] == 1803.46 and "local_set" not in data
    assert RoundRecord.from_dict(data).to_dict() == data
    result = OptimizationResult(program=None, baseline_val=0.5, interrupted=cut)
    assert result.manifest_part()["optimizer"]["interrupted"] == data
    manifest = {**result.manifest_part(), "seconds": 1900.0}
    manifest["optimizer"]["stop_reason"] = "time"
    line = closing_lines(manifest, Path("run"), report_written=False)[1]
    assert line == (f"round 2 cut short while repairing (the time budget; 1803 s and 41 LM calls into "
                    f"it): blamed {EXTRACT} 3, {ANSWER} 1; not fixable by prompts mem0.apply 1; chose {EXTRACT}; "
                    f"findings: date_form; repairs: 3 tried, 1 confirmed")
