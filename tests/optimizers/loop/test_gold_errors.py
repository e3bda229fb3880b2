"""GoldError cases leave the loop's training signal: no predictor is blamed for them, their questions leave the
local set, and the round's record and the closing lines count them."""

from __future__ import annotations

from pathlib import Path

import pytest
from optfixtures import BAD_EXTRACT, EXTRACT, make_models

from memtrace_opt.attribution import GOLD, Verdict, get_attributor
from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, with_instruction
from memtrace_opt.optimizers.closing import closing_lines
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory

WRONG_KEY = "toy-opt:q-louvre-when"  # a question the planted extractor fails: here its gold answer is taken as wrong


class GoldErrorFor:
    """Lineage's verdicts, except GoldError for the cases named."""

    name = "gold-error-for"

    def __init__(self, case_ids: set[str]) -> None:
        self.case_ids = case_ids
        self.inner = get_attributor("lineage")

    def attribute(self, case, graph) -> Verdict:
        if case.case_id in self.case_ids:
            return Verdict(case.case_id, self.name, GOLD, None, None, None, "the gold answer is wrong", 0.9)
        return self.inner.attribute(case, graph)


@pytest.fixture
def windows():
    return with_instruction(Mem0Memory(Mem0Config(window_turns=2)), EXTRACT, BAD_EXTRACT)


def first_round(attribution, windows, examples):
    models, _ = make_models()
    settings = LoopSettings.of(rounds=1, candidates=1, minibatch=4, demos=1, min_val_questions=1)
    opt = MemTraceOptimizer.from_models(models, settings=settings, attribution=attribution)
    opt.compile(windows, trainset=examples, valset=examples)
    return opt.result.rounds[0], opt


def test_a_gold_error_case_is_left_out_of_the_training_signal_and_counted(windows, examples) -> None:
    plain, _ = first_round("lineage", windows, examples)
    left, opt = first_round(GoldErrorFor({WRONG_KEY}), windows, examples)
    assert plain.not_fixable == {} and left.not_fixable == {GOLD: 1}
    assert sum(left.blame_counts.values()) == sum(plain.blame_counts.values()) - 1
    assert left.local_set is not None and plain.local_set is not None
    assert left.local_set["excluded"] == {"gold_error": 1}
    assert left.local_set["targets"] == plain.local_set["targets"] - 1
    manifest = {"rounds": [left.to_dict()], "baseline": {"val_accuracy": opt.result.baseline_val}}
    lines = closing_lines(manifest, Path("out"), report_written=False)
    assert "1 GoldError (the gold answer is wrong; left out of the training signal)" in lines[0]
    assert "1 GoldError targets left out" in lines[1]
