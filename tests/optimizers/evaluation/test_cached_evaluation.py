"""Cached replay: a rewrite re-runs only the ops whose content changed."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest
from optfixtures import ANSWER, EXTRACT, FIX

from memtrace_opt.optimizers import (
    AnswerMetric,
    BudgetExhausted,
    CachedEvaluator,
    LMBudget,
    MemoryQA,
    QAContext,
    case_refs,
    with_instruction,
)
from memtrace_opt.programs.mem0 import Mem0Memory


def test_answer_rewrite_does_not_rerun_the_write_path(fake_models, examples):
    models, engine = fake_models
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    cases = case_refs(examples)
    program = Mem0Memory()
    first = evaluator.evaluate(program, cases)
    extract_calls = engine.counts["extract_facts"]
    assert extract_calls > 0 and first.lm_calls > len(cases)
    rewritten = with_instruction(program, ANSWER, instructions(program)[ANSWER] + " Use the context only.")
    second = evaluator.evaluate(rewritten, cases)
    assert engine.counts["extract_facts"] == extract_calls  # write path served from the memo
    assert second.lm_calls == len(cases)  # only the answers ran
    assert second.reused_ops > 0
    third = evaluator.evaluate(rewritten, cases)
    assert third.lm_calls == 0  # everything seen before


def test_extraction_rewrite_reruns_extraction(fake_models, examples):
    models, engine = fake_models
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    cases = case_refs(examples)
    program = Mem0Memory()
    evaluator.evaluate(program, cases)
    before = engine.counts["extract_facts"]
    evaluator.evaluate(with_instruction(program, EXTRACT, instructions(program)[EXTRACT] + FIX), cases)
    assert engine.counts["extract_facts"] > before


def instructions(program):
    return {name: p.signature.instructions for name, p in program.named_predictors()}


def test_memory_qa_caches_state_per_write_path_fingerprint(fake_models, examples):
    models, engine = fake_models
    context = QAContext()
    qa = MemoryQA(Mem0Memory(), context)
    with dspy.context(lm=models.task):
        for example in examples[:3]:
            qa(**example.inputs())
        assert context.memorizations == 1
        assert EXTRACT in (context.write_predictors or set()) and ANSWER not in context.write_predictors
        other = qa.deepcopy()
        other.memory = with_instruction(other.memory, ANSWER, instructions(other.memory)[ANSWER] + " Be brief.")
        other(**examples[0].inputs())
        assert context.memorizations == 1  # the answer prompt changed: same memory
        changed = qa.deepcopy()
        changed.memory = with_instruction(changed.memory, EXTRACT, instructions(changed.memory)[EXTRACT] + FIX)
        changed(**examples[0].inputs())
        assert context.memorizations == 2


def test_memory_qa_is_thread_safe_and_memorizes_once(fake_models, examples):
    models, _ = fake_models
    context = QAContext()
    qa = MemoryQA(Mem0Memory(), context)
    results = []
    lock = threading.Lock()

    def ask(example):
        with dspy.context(lm=models.task):
            answer = qa(**example.inputs()).answer
        with lock:
            results.append(answer)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(ask, examples))
    assert len(results) == len(examples) and context.memorizations == 1


def test_memory_qa_stops_at_the_budget(fake_models, examples):
    models, _ = fake_models
    context = QAContext(budget=LMBudget(models.usage, 0))
    qa = MemoryQA(Mem0Memory(), context)
    with dspy.context(lm=models.task), pytest.raises(BudgetExhausted):
        qa(**examples[0].inputs())


def test_answer_shape_shows_a_longer_answer_the_token_rule_counts_as_right():
    from memtrace_opt.data import Question
    from memtrace_opt.optimizers.comparison.compare import AnswerShape
    from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult

    metric = AnswerMetric()
    question = Question("q1", "Where did Odalys move from?", "Varnholm", "single-hop", 1, ("D1:3",))

    def result(answer: str) -> EvalResult:
        return EvalResult([CaseResult("q1", "c", question, answer, metric(question, answer))])

    short, long = result("Varnholm"), result("Odalys moved here from Varnholm four years ago with her family")
    assert short.accuracy == long.accuracy == 1.0  # full recall: both right under the token rule
    shape = AnswerShape.of(short, long)
    assert shape.f1_before == 1.0 and shape.f1_after < 0.3  # F1 tells them apart
    assert (shape.words_before, shape.words_after) == (1.0, 11.0)
    assert shape.cells() == (f"1.000 → {shape.f1_after:.3f}", "1.0 → 11.0")
    assert EvalResult([]).mean_f1 == 0.0 and EvalResult([]).mean_words == 0.0


def test_the_metric_is_named_by_the_token_rule_it_scores_with():
    from memtrace_opt.data import Question
    from memtrace_opt.metrics import TOKEN_RULE

    assert AnswerMetric().name == TOKEN_RULE and AnswerMetric(judge=True).name == "judge"
    question = Question("q1", "How long ago did Odalys move?", "5 weeks ago", "single-hop", 1, ("D1:3",))
    bare = AnswerMetric()(question, "5")
    assert not bare.correct and bare.scores["bare_number"] == 1.0
    assert "bare_number" not in AnswerMetric()(question, "five weeks ago").scores
