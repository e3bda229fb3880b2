"""Every key the loop keeps in its study (study-level user attributes), in one place.

    baseline            {val_accuracy}: the student's validation accuracy
    val_ops             predictor -> its op calls in the student's run of the valset (what a validation re-runs)
    call_stats          predictor -> its live calls in that run: how many, their seconds and tokens (the pricing)
    lm_calls_total      the metered LM calls that reached the model, every run on this study together
    round:N             the round's `RoundPlan` (what workers sharing the round score, what later rounds read)
    round_done:N        the round's `RoundRecord`: a resumed run applies it without an LM call
    next:N              {reason, at}: the leader's word on whether the run goes on after round N (workers)
    stopped:N           {reason, interrupted, at}: the run stopped before deciding round N (workers)
    lm_calls:WORKER     one worker's metered LM calls in its run (`crew.py`)
    replies:NAME        replies a round's objective kept for workers sharing it (`study.StudyReplyBook`)
    settings~rN:OP      (a study of its own) the settings search's trials of round N (`settings_source.py`)

What is not here is not kept: a round cut short keeps no state of its own, since every LM reply it paid for is in the
reply cache (`memtrace_opt.lm.reply_cache`) and a resumed run goes through the round again without a live call
where nothing changed.
"""

from __future__ import annotations

__all__ = ["BASELINE", "CALL_STATS", "LM_CALLS_TOTAL", "VAL_OPS", "done", "going_on", "plan", "replies", "spend", "stopped"]

BASELINE = "baseline"
VAL_OPS = "val_ops"
CALL_STATS = "call_stats"
LM_CALLS_TOTAL = "lm_calls_total"


def plan(number: int) -> str:
    return f"round:{number}"


def done(number: int) -> str:
    return f"round_done:{number}"


def going_on(number: int) -> str:
    return f"next:{number}"


def stopped(number: int) -> str:
    return f"stopped:{number}"


def spend(worker: str) -> str:
    return f"lm_calls:{worker}"


def replies(name: str) -> str:
    return f"replies:{name}"
