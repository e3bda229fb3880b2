"""Graphtrace's confirmation: a verdict on an upstream op stands confirmed only when a replay of that op's repair
saves the answer; a replay that confirms nothing never moves the verdict.

`confirm(...)` takes the method's verdicts in the order it would give them (its first verdict, the structural one,
then its next suspects). A verdict on the answer op, a GoldError or an error is returned as it is: setting the
answer is no test. For a verdict on an upstream op, the case's conversation is replayed once unchanged
(`CaseReplayer.reproduces`, not counted among the replays); if that reproduces the failure, the op's outputs are
repaired (`repair_outputs`) and replayed with them forced. Saved: the verdict, `confirmed` True. Not saved: the
next upstream suspect is tried the same way, at most `max_replays` repaired replays a case, and the first whose
repair saves the answer is the verdict, confirmed. When none does, the first verdict stands, whatever stopped the
search (a suspect that cannot be repaired or forced, the answer op next, spent replays, a failed replay): with
`confirmed` False once the replay of its own repair did not save the answer (its confidence at most 0.5), else
`confirmed` None (no replay tested it: a failure that does not reproduce, a replay that cannot be run, an op that
cannot be repaired); its reason says it was not confirmed and why. Every verdict returned after a replay carries
the case's `replays`, and the task model's calls during them in its cost (`replay_calls`, apart from the
attributor's `lm_calls`). Without a replay context for the case, the first verdict is returned unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

import networkx as nx

from memtrace_opt.attribution._ask import Asker
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.attribution._replay import CaseReplayer, ReplayProvider
from memtrace_opt.attribution._types import GOLD, FailedCase, Verdict

__all__ = ["confirm", "upstream"]

log = logging.getLogger(__name__)

REASON_CHARS = 1000


def upstream(verdict: Verdict, flow: Flow) -> bool:
    """Whether `verdict` names an op before the answer op (not a GoldError, not an error)."""
    return (verdict.error is None and verdict.op_id is not None and verdict.error_type != GOLD
            and verdict.op_id != flow.answer_op)


def _noted(verdict: Verdict, note: str, replayer: CaseReplayer | None = None, *, confirmed: bool | None = None,
           confidence: float | None = None) -> Verdict:
    reason = f"{verdict.reason} ({note})" if note else verdict.reason
    noted = replace(verdict, reason=reason[:REASON_CHARS], confirmed=confirmed,
                    confidence=verdict.confidence if confidence is None else confidence)
    return replayer.recorded(noted) if replayer is not None else noted


def _ops(verdicts: list[Verdict]) -> str:
    return ", ".join(f"{v.op} ({v.op_id})" for v in verdicts)


def confirm(case: FailedCase, graph: nx.MultiDiGraph, view: GraphView, flow: Flow, verdicts: Iterator[Verdict],
            provider: ReplayProvider, asker: Asker, max_replays: int) -> Verdict:
    """The first of `verdicts` a replay confirms, as the module docstring says. Never raises for a failed replay."""
    first = next(verdicts)
    if not upstream(first, flow) or max_replays <= 0:
        return first
    replayer: CaseReplayer | None = None
    try:
        context = provider(case)
        if context is None:
            return first
        replayer = CaseReplayer(case, graph, view, flow, context)
        with asker.uncounted():
            reproduced = replayer.reproduces()
    except Exception as error:  # noqa: BLE001 - a replay that cannot run leaves the verdict unconfirmed
        log.warning("graphtrace: replay of %s failed: %s: %s", case.case_id, type(error).__name__, error)
        return _noted(first, f"unconfirmed: the replay failed: {type(error).__name__}: {error}", replayer)
    if not reproduced:
        note = f"unconfirmed: the replay does not reproduce the failure (it answers {replayer.reproduced_answer!r})"
        return _noted(first, note, replayer)
    rejected: list[Verdict] = []
    current: Verdict | None = first
    while current is not None:
        if not upstream(current, flow):  # the answer op or a GoldError: no replay tests it
            return _unconfirmed(first, rejected, "", replayer)
        op = str(current.op_id)
        if op in {v.op_id for v in rejected}:
            current = next(verdicts, None)
            continue
        if replayer.repaired >= max_replays:
            return _unconfirmed(first, rejected, f"no replay left (at most {max_replays} a case)", replayer)
        try:
            replay = replayer.try_repair(op, asker)
        except Exception as error:  # noqa: BLE001
            log.warning("graphtrace: replay of %s failed: %s: %s", case.case_id, type(error).__name__, error)
            return _unconfirmed(first, rejected, f"the replay failed: {type(error).__name__}: {error}", replayer)
        if replay is None:
            return _unconfirmed(first, rejected, f"{current.op} cannot be repaired and forced in a replay", replayer)
        if replay.correct:
            note = f"confirmed: repairing {current.op} ({op}) and replaying answers {replay.answer!r}"
            return _noted(current, note, replayer, confirmed=True, confidence=max(current.confidence, 0.9))
        rejected.append(current)
        current = next(verdicts, None)
    return _unconfirmed(first, rejected, "", replayer)


def _unconfirmed(first: Verdict, rejected: list[Verdict], note: str, replayer: CaseReplayer) -> Verdict:
    """The first verdict, where it stood: no replay confirmed a suspect. `confirmed` False when the replay of its
    own repair was rejected (`rejected` then starts with it), else None; `note` says what stopped the search."""
    if not rejected:
        return _noted(first, f"unconfirmed: {note}", replayer)
    tried = f"unconfirmed: replays with {_ops(rejected)} repaired did not save the answer"
    return _noted(first, f"{tried}; {note}" if note else tried, replayer, confirmed=False,
                  confidence=min(first.confidence, 0.5))
