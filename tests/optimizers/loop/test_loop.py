"""The closed loop with the fake LM: it finds and fixes the planted bad instruction, and stops as told."""

from __future__ import annotations

from optfixtures import ANSWER, BAD_EXTRACT, DECIDE, EXTRACT, FIXED, make_models

from memtrace_opt.optimizers import LoopSettings, MemoryQA, MemTraceOptimizer, instructions_of
from memtrace_opt.optimizers.loop.records import RoundRecord
from memtrace_opt.programs.mem0 import Mem0Memory

ROUND_KEYS = {"round", "blame_counts", "not_fixable", "chosen_predictor", "previous_instruction", "candidates",
              "accepted", "val_accuracy", "lm_calls", "cached_calls", "lm_calls_total", "seconds", "findings", "outcome",
              "phases"}
CANDIDATE_KEYS = {"instruction", "minibatch_score", "val_score", "accepted", "why"}


def optimizer(models, **settings) -> MemTraceOptimizer:
    defaults = {"rounds": 4, "candidates": 2, "minibatch": 5, "repairs": 0}  # the instruction path: repairs off
    return MemTraceOptimizer.from_models(models, settings=LoopSettings.of(**{**defaults, **settings}),
                                         attribution="lineage")


def test_fixes_the_planted_instruction_and_leaves_the_others(fake_models, planted, examples):
    models, _ = fake_models
    opt = optimizer(models)
    optimized = opt.compile(planted, trainset=examples, valset=examples)
    before, after = instructions_of(planted), instructions_of(optimized)
    assert after[EXTRACT] == FIXED
    assert after[ANSWER] == before[ANSWER] and after[DECIDE] == before[DECIDE]
    first = opt.result.rounds[0]
    assert first.chosen_predictor == EXTRACT
    assert first.blame_counts[EXTRACT] == max(first.blame_counts.values())
    assert first.accepted and first.val_accuracy > opt.result.baseline_val
    assert isinstance(optimized, Mem0Memory) and instructions_of(planted)[EXTRACT] == BAD_EXTRACT  # a copy


def test_the_proposer_sees_the_blamed_calls_and_correct_cases(fake_models, planted, examples):
    models, engine = fake_models
    optimizer(models, rounds=1).compile(planted, trainset=examples, valset=examples)
    first = engine.calls_for("new_instruction")[0].inputs
    assert first["step"].startswith("mem0.extract_facts") and first["current_instruction"] == BAD_EXTRACT
    assert "Why this step was blamed:" in first["failed_cases"] and "[[" not in first["step"]
    assert "yesterday" in first["failed_cases"]  # the messages the extraction was shown
    assert "Respond with" not in first["failed_cases"]  # the adapter's reply-format reminder is not evidence
    assert "This step produced:" in first["failed_cases"]
    assert first["correct_cases"] != "(none)"


def test_each_accepted_step_changes_exactly_one_predictor(fake_models, planted, examples):
    models, _ = fake_models
    seen = []
    opt = optimizer(models)
    opt.on_round = seen.append
    opt.compile(planted, trainset=examples, valset=examples)
    current = instructions_of(planted)
    for record in seen:
        if not record.accepted:
            continue
        changed = dict(current)
        changed[record.chosen_predictor] = record.accepted_instruction
        assert sum(changed[k] != current[k] for k in current) == 1
        assert record.previous_instruction == current[record.chosen_predictor]
        current = changed
    assert any(r.accepted for r in seen)


def test_manifest_has_the_report_shape(fake_models, planted, examples):
    models, _ = fake_models
    opt = optimizer(models)
    opt.compile(planted, trainset=examples, valset=examples)
    part = opt.result.manifest_part()
    assert set(part["baseline"]) == {"val_accuracy"}
    assert part["rounds"] and all(set(r) - {"local_set"} == ROUND_KEYS for r in part["rounds"])  # optional
    for record in part["rounds"]:
        assert all(set(c) - {"local", "demos", "origin", "replayed", "status", "rungs"} == CANDIDATE_KEYS
                   for c in record["candidates"])  # optional
        assert all(c["origin"] == "reflection" or c["origin"].startswith("pattern:")
                   for c in record["candidates"] if "demos" not in c)  # every proposal says where it came from
        assert sum(c["accepted"] for c in record["candidates"]) == int(record["accepted"])
        assert RoundRecord.from_dict(record).to_dict() == record


def test_plateau_stops_after_patience_rounds_without_a_change(planted, examples):
    def useless(call):
        return {"new_instruction": "Write short notes about the people. Skip anything about time."}

    models, _ = make_models(useless, rules=lambda call: {"rules": "Skip anything about time."})
    opt = optimizer(models, rounds=6, patience=2)
    optimized = opt.compile(planted, trainset=examples, valset=examples)
    assert opt.result.stop_reason == "plateau"
    assert len(opt.result.rounds) == 2 and not any(r.accepted for r in opt.result.rounds)
    assert instructions_of(optimized) == instructions_of(planted)


def test_budget_stops_the_loop(fake_models, planted, examples):
    models, _ = fake_models
    opt = optimizer(models, rounds=6, budget=20)
    opt.compile(planted, trainset=examples, valset=examples)
    result = opt.result
    assert result.stop_reason == "budget"
    assert result.lm_calls <= 20  # the baseline (under the budget) completes; the rounds stop at the limit
    assert len(result.rounds) < 6


def test_no_round_starts_that_could_not_validate_a_candidate(fake_models, planted, examples):
    """A validation re-runs at least the changed predictor's calls on the valset: with fewer calls left than the
    fewest any predictor's validation takes, the loop stops and keeps them."""
    models, _ = fake_models
    whole = optimizer(models, rounds=1)
    whole.compile(planted, trainset=examples, valset=examples)
    baseline_calls = whole.result.rounds[0].lm_calls_total - whole.result.rounds[0].lm_calls
    opt = optimizer(models, rounds=6, budget=baseline_calls + 1)
    opt.compile(planted, trainset=examples, valset=examples)
    assert opt.result.stop_reason == "budget" and opt.result.rounds == []
    assert opt.result.lm_calls == baseline_calls  # the call left is not spent on a round that cannot finish
    assert "interrupted" not in opt.result.manifest_part()["optimizer"]


def test_a_memory_qa_student_comes_back_as_a_memory_qa(fake_models, planted, examples):
    models, _ = fake_models
    student = MemoryQA(planted)
    optimized = optimizer(models).compile(student, trainset=examples, valset=examples)
    assert isinstance(optimized, MemoryQA)
    assert instructions_of(optimized.memory)[EXTRACT] == FIXED


def test_time_budget_stops_after_the_baseline(fake_models, planted, examples):
    models, _ = fake_models
    opt = optimizer(models, time_budget=0)
    optimized = opt.compile(planted, trainset=examples, valset=examples)
    assert opt.result.stop_reason == "time" and opt.result.rounds == []
    assert opt.result.baseline_val > 0 and instructions_of(optimized) == instructions_of(planted)


def mispriced(monkeypatch) -> None:
    """Validations priced at nothing: the round reserves none, so the budget can cut it (a wrong estimate is the
    one way a round the engine started is cut by the LM-call budget)."""
    from memtrace_opt.optimizers.loop.pricing import Price, Pricer

    monkeypatch.setattr(Pricer, "validation", lambda self, predictor, **_: Price(0, 0.0))


def test_a_round_cut_short_by_the_budget_shows_how_far_it_got(fake_models, planted, examples, monkeypatch):
    models, _ = fake_models
    mispriced(monkeypatch)
    whole = optimizer(models, rounds=1)
    whole.compile(planted, trainset=examples, valset=examples)
    baseline_calls = whole.result.rounds[0].lm_calls_total - whole.result.rounds[0].lm_calls
    opt = optimizer(models, rounds=6, budget=24, demos=0, local_objective=False, settings=False)  # cut among candidates
    opt.compile(planted, trainset=examples, valset=examples)
    result = opt.result
    assert result.stop_reason == "budget" and result.rounds == []
    cut = result.manifest_part()["optimizer"]["interrupted"]
    assert cut["round"] == 1 and cut["chosen_predictor"] == EXTRACT and cut["blame_counts"][EXTRACT] >= 1
    assert cut["why"].startswith("cut short: 3 LM calls left")  # too few for the next candidate: the round resumes
    assert cut["phase"] == "candidates" and cut["not_fixable"] == {} and 0 < cut["lm_calls"] <= 24 - baseline_calls
    by_text = {c["instruction"]: c for c in cut["candidates"]}
    assert by_text[FIXED]["minibatch_score"] > 0.5 and by_text[FIXED]["local"]["fixed"] >= 1
    useless = by_text["Write short notes about the people. Skip anything about time."]
    assert useless["minibatch_score"] is None and useless["why"].startswith(("rejected by the local check", "not scored"))
    assert [p["phase"] for p in cut["phases"]][-1] == "candidates"  # what each phase it reached cost: not validated

    # the attributor's questions are LM calls too: the budget ends while the first round attributes its failures
    opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(rounds=6, candidates=2, minibatch=5, repairs=0,
                                                                      budget=13), attribution="graphtrace")
    opt.compile(planted, trainset=examples, valset=examples)
    cut = opt.result.manifest_part()["optimizer"]["interrupted"]
    assert cut["chosen_predictor"] is None and cut["phase"] == "plan" and cut["candidates"] == []
    assert cut["blame_counts"] == {} and "repairs" not in cut and cut["lm_calls"] >= 1  # spent before the cut
    opt = optimizer(models, rounds=1)  # a run the budget did not cut records none, and times its rounds
    opt.compile(planted, trainset=examples, valset=examples)
    assert "interrupted" not in opt.result.manifest_part()["optimizer"]
    assert opt.result.rounds[0].seconds > 0


def test_a_gain_of_fewer_validation_questions_than_asked_for_is_rejected(fake_models, planted, examples):
    models, _ = fake_models
    n = len(examples)
    fixed = optimizer(models, rounds=1, min_val_questions=1)
    fixed.compile(planted, trainset=examples, valset=examples)
    gain = round((fixed.result.rounds[0].val_accuracy - fixed.result.baseline_val) * n)
    assert fixed.result.rounds[0].accepted and gain >= 2

    enough = optimizer(models, rounds=1, min_val_questions=gain)
    assert instructions_of(enough.compile(planted, trainset=examples, valset=examples))[EXTRACT] == FIXED

    strict = optimizer(models, rounds=1, min_val_questions=gain + 1)
    kept = strict.compile(planted, trainset=examples, valset=examples)
    assert instructions_of(kept)[EXTRACT] == BAD_EXTRACT and not strict.result.rounds[0].accepted
    validated = [c for c in strict.result.rounds[0].candidates if c.val_score is not None]
    assert validated and f"+ {gain / n:.3f}" in validated[0].why  # the margin: `gain` questions' worth, less a hair


def test_calls_to_best_stop_at_the_accepting_round_when_later_rounds_spend_calls(fake_models, planted, examples,
                                                                                 monkeypatch):
    models, _ = fake_models
    whole = optimizer(models, rounds=1)
    whole.compile(planted, trainset=examples, valset=examples)
    first = whole.result.rounds[0]
    assert first.accepted and first.lm_calls_total == whole.result.lm_calls == whole.result.calls_to_best

    mispriced(monkeypatch)  # no validation reserved: a later round spends what it has on scoring
    later = optimizer(models, rounds=6, budget=first.lm_calls_total + 11)  # a later round scores, accepts nothing
    later.compile(planted, trainset=examples, valset=examples)
    result = later.result
    assert result.stop_reason == "budget" and result.rounds[0].accepted and not result.rounds[-1].accepted
    assert "interrupted" not in result.manifest_part()["optimizer"]  # no round started that the budget cut
    assert first.lm_calls_total < result.lm_calls <= first.lm_calls_total + 11
    assert result.calls_to_best == first.lm_calls_total  # the later rounds' calls came after the best
