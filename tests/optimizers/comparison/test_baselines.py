"""Each DSPy optimizer adapter runs on a tiny budget and stays within it."""

from __future__ import annotations

import pytest

from memtrace_opt.optimizers.comparison.baselines import BASELINES, run_baseline
from memtrace_opt.programs.mem0 import Mem0Memory


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_adapter_runs_within_budget(name, fake_models, planted, examples):
    models, _ = fake_models
    run = run_baseline(name, planted, examples[:6], examples[6:], models=models, budget=24)
    assert run.error is None, run.error
    assert 0 < run.lm_calls <= 24
    assert isinstance(run.program, Mem0Memory)
    assert [n for n, _ in run.program.named_predictors()] == [n for n, _ in planted.named_predictors()]


def test_gepa_finds_the_fix_within_budget(fake_models, planted, examples):
    models, _ = fake_models
    run = run_baseline("gepa", planted, examples[:6], examples[6:], models=models, budget=60)
    fixed = dict(run.program.named_predictors())["extract_facts.predict"].signature.instructions
    assert "date" in fixed.lower()


def test_a_search_that_catches_the_budget_stop_itself_is_still_reported_as_stopped(fake_models, planted, examples):
    """optuna_blind ends its own trials when the budget runs out and returns its best program; the row must still say
    the budget stopped it."""
    models, _ = fake_models
    run = run_baseline("optuna_blind", planted, examples[:6], examples[6:], models=models, budget=8)
    assert run.error is None and run.lm_calls >= 8
    assert run.stopped_by_budget


def test_mipro_on_minibatches_outlasting_its_combinations_ends_with_its_best_program(fake_models):
    """A one-predictor program has as many combinations as MIPROv2 has instruction candidates (3); on a validation
    set larger than its minibatch it runs more full evaluations than that, and DSPy 3.4 raised when none was left."""
    from toydata import toy_conversation

    from memtrace_opt.optimizers import make_examples
    from memtrace_opt.programs.rag import RAGMemory

    models, _ = fake_models
    student = RAGMemory()
    assert len(student.predictors()) == 1
    examples = make_examples([toy_conversation("toy-a"), toy_conversation("toy-b"), toy_conversation("toy-c")])
    run = run_baseline("mipro", student, examples[:9], examples[9:], models=models, budget=400)
    assert len(examples[9:]) > 8  # on minibatches
    assert run.error is None, run.error
    assert 0 < run.lm_calls <= 400 and isinstance(run.program, RAGMemory)
