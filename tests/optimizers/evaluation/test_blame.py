"""Blame: verdicts on LM ops blame their predictor; the rest is counted as not fixable by prompts."""

from __future__ import annotations

import dspy
from optfixtures import EXTRACT

from memtrace_opt.attribution import GOLD, RETRIEVAL, Verdict
from memtrace_opt.optimizers import AnswerMetric, CachedEvaluator, case_refs
from memtrace_opt.optimizers.evaluation.blame import UNATTRIBUTED, attribute_failures
from memtrace_opt.programs.mem0 import Mem0Memory


class ScriptedAttributor:
    """Blames the first op named `op` in the graph for every case, except the scripted exceptions."""

    name = "scripted"

    def __init__(self, plan: dict[str, str]) -> None:
        self.plan = plan

    def attribute(self, case, graph) -> Verdict:
        what = self.plan.get(case.case_id, "mem0.extract_facts")
        if what == "fail":
            return Verdict.failed(case.case_id, self.name, "no answer op")
        if what == GOLD:
            return Verdict(case.case_id, self.name, GOLD, None, None, None, "gold is wrong", 0.9)
        node = next(n for n, d in graph.nodes(data=True) if d.get("kind") == "op" and d.get("op") == what)
        data = graph.nodes[node]
        return Verdict(case.case_id, self.name, RETRIEVAL, node, data["op"], data.get("predictor"), "scripted", 1.0)


def test_blame_counts_and_not_fixable(fake_models, examples):
    models, _ = fake_models
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task)
    evaluation = evaluator.evaluate(Mem0Memory(), case_refs(examples))
    cases = evaluation.cases[:5]
    ids = [c.case_id for c in cases]
    plan = {ids[1]: "mem0.retrieve", ids[2]: GOLD, ids[3]: "fail"}
    predictors = [n for n, _ in Mem0Memory().named_predictors()]
    with dspy.context(lm=models.task):
        blame = attribute_failures(evaluation, cases, method=ScriptedAttributor(plan), predictors=predictors)
    assert blame.counts() == {EXTRACT: 2}
    assert blame.not_fixable == {GOLD: 1, "mem0.retrieve": 1, UNATTRIBUTED: 1}
    assert [v.case_id for v in blame.by_predictor[EXTRACT]] == [ids[0], ids[4]]
