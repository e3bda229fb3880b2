"""The demos script: which calls make which demo sets, and a dry run with the fake LM."""

from __future__ import annotations

from memtrace_opt.benchmarks.bench_demos import answer_calls, demo_sets, main
from memtrace_opt.data import load_data
from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator, case_refs, make_examples
from memtrace_opt.programs import make_program


def test_right_calls_keep_their_reply_and_wrong_ones_are_shown_with_the_gold():
    program = make_program("long_context")
    models = Models.from_roles(ModelRoles(task=ModelSpec("fake")))
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    evaluation = evaluator.evaluate(program, case_refs(make_examples(load_data("sample").conversations)))
    calls = answer_calls(evaluation, evaluator.memo, "answer.predict")
    assert len(calls) == len(evaluation.cases)  # one answer call per question
    right = {c.question.question: c for c in evaluation.passed()}
    wrong = {c.question.question: c for c in evaluation.failed()}
    assert right and wrong
    sets = demo_sets(program.answer.predict.signature, calls, embedder=None)
    for demo in sets["right x2, whole"]:
        assert demo["question"] in right and demo["answer"] == right[demo["question"]].prediction
    for demo in sets["wrong with the gold x4, compact"]:
        assert demo["question"] in wrong and demo["answer"] == wrong[demo["question"]].question.answer
    assert len(sets["right, all, compact"]) >= len(sets["right x4, compact"]) >= len(sets["right x2, compact"])


def test_dry_run_prints_a_row_per_demo_set_and_none_against_itself(capsys):
    assert main(["--system", "long_context", "--lm", "fake", "--data", "sample", "--train", "", "--val", "",
                 "--test", "", "--categories", "", "--embedder", "none"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    labels = [row.split(" | ")[0].removeprefix("| ") for row in rows[1:]]
    assert labels == ["none", "right x2, whole", "right x2, compact", "right x4, compact", "right, all, compact",
                      "wrong with the gold x4, compact", "right x2 + wrong with the gold x2, compact"]
    cells = rows[1].split(" | ")
    assert cells[1] == "0" and cells[3] == cells[6] == "+0 / -0"  # no demos, against itself, train and val
