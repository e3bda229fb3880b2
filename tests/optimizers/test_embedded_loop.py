"""One short round of the loop with the real embedded model (RAG: no LM on the write path)."""

from __future__ import annotations

import pytest

from memtrace_opt.data import load_sample
from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, make_examples
from memtrace_opt.programs.rag import RAGConfig, RAGMemory


@pytest.mark.embedded
def test_one_round_with_the_embedded_model():
    models = Models(ModelRoles(task=ModelSpec(model="embedded", max_tokens=256)))
    examples = make_examples(load_sample().conversations)
    settings = LoopSettings.of(rounds=1, candidates=1, minibatch=2, budget=10, evidence_cases=1)
    optimizer = MemTraceOptimizer.from_models(models, settings=settings, attribution="lineage")
    optimizer.compile(RAGMemory(RAGConfig(top_k=2)), trainset=examples[:2], valset=examples[2:4])
    result = optimizer.result
    assert result is not None and 0.0 <= result.baseline_val <= 1.0
    assert result.lm_calls <= 10 and result.stop_reason in ("max_rounds", "plateau", "budget")
    assert all(r.chosen_predictor in (None, "answer.predict") for r in result.rounds)
