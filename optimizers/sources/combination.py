"""`combine`: the round's best rewrite joined with its demos candidate's demos.

When both kinds pass the minibatch, the rewrite is validated with the demos (an instruction and worked examples
fix different questions, and it would be deployed with them), the demos alone beside it. It comes after the
minibatch, from two candidates of the round, so it is no `CandidateSource`; the round validates it with the
validation gate and takes it only if it also beats the demos alone.
"""

from __future__ import annotations

from memtrace_opt.optimizers.core.candidate import COMBINED, Candidate

__all__ = ["combine"]


def combine(rewrite: Candidate, demos: Candidate) -> Candidate:
    """`rewrite`'s instruction with `demos`' demo list, for their predictor."""
    if rewrite.predictor != demos.predictor or demos.demos is None:
        raise ValueError("combine: a rewrite and a demos candidate of one predictor")
    return Candidate(rewrite.predictor, rewrite.instruction, demos.demos, COMBINED)
