"""The combination: the best rewrite's instruction with the demos candidate's demos."""

from __future__ import annotations

import pytest

from memtrace_opt.optimizers import Candidate
from memtrace_opt.optimizers.sources.combination import combine

ANSWER = "answer.predict"


def test_the_rewrite_takes_the_demos():
    rewrite = Candidate.of(ANSWER, "Answer in a short phrase.")
    demos = Candidate.of(ANSWER, "Answer.", [{"question": "When?", "answer": "May"}], "demos")
    both = combine(rewrite, demos)
    assert (both.instruction, both.demo_list(), both.origin) == ("Answer in a short phrase.",
                                                                 [{"question": "When?", "answer": "May"}], "combined")
    assert both.key(2, "abc") != rewrite.key(2, "abc") != demos.key(2, "abc")


def test_only_a_rewrite_and_demos_of_one_predictor_combine():
    with pytest.raises(ValueError):
        combine(Candidate.of(ANSWER, "A."), Candidate.of(ANSWER, "B."))
    with pytest.raises(ValueError):
        combine(Candidate.of(ANSWER, "A."), Candidate.of("other.predict", "B.", [], "demos"))
