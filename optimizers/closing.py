"""The closing lines of `memtrace optimize`: what the run blamed, what each round tried, what it accepted and why
(`loop/story.py`), the held-out test, and where in report.html to look. Written from the finished run's manifest
only (rounds, optimizer summary, test).

    lines = closing_lines(RunDir(out).read_manifest(), out, report_written=RunDir(out).report_path.is_file())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memtrace_opt.optimizers.evaluation.splits import HELD_OUT, NOT_HELD_OUT, SAME_CONVERSATION
from memtrace_opt.optimizers.loop.records import RoundRecord
from memtrace_opt.optimizers.loop.stop import StopReason
from memtrace_opt.optimizers.loop.story import MAX_ROUND_LINES, counts_text, rounds_lines
from memtrace_opt.rundir import RunDir

__all__ = ["ROUNDS_ANCHOR", "FAILURES_ANCHOR", "MAX_ROUND_LINES", "closing_lines"]

ROUNDS_ANCHOR = "optimize"  # report.html's section with every round, its candidates and the accepted diffs
FAILURES_ANCHOR = "failures"  # report.html's section with the failed (held-out test) questions

_STOPPED = {
    StopReason.MAX_ROUNDS.value: "ran all its rounds",
    StopReason.PLATEAU.value: "plateau (--patience rounds in a row without an accepted change)",
    StopReason.BUDGET.value: "the LM-call budget was spent",
    StopReason.TIME.value: "the time budget was spent",
}


def closing_lines(manifest: Mapping[str, Any], run_dir: Path, *, report_written: bool) -> list[str]:
    """About 4-8 plain lines for a finished optimization whose manifest is `manifest`, written to `run_dir`
    (`report_written`: its report.html exists)."""
    rounds = [RoundRecord.from_dict(r) for r in manifest.get("rounds") or []]
    optimizer = manifest.get("optimizer") or {}
    cut = optimizer.get("interrupted")
    lines = rounds_lines(manifest, cut, str(optimizer.get("stop_reason") or ""))
    lines.append(_val_line(manifest, rounds))
    test = manifest.get("test") or {}
    lines.append(_test_line(test, run_dir))
    lines.append(_look_line(run_dir, bool(rounds or cut), _still_failing(test), report_written))
    return lines

def _val_line(manifest: Mapping[str, Any], rounds: Sequence[RoundRecord]) -> str:
    optimizer = manifest.get("optimizer") or {}
    baseline = float((manifest.get("baseline") or {}).get("val_accuracy") or 0.0)
    best = float(optimizer.get("best_val_accuracy", baseline))
    reason = str(optimizer.get("stop_reason") or "")
    accepted = sum(r.accepted for r in rounds)
    return (f"valset {baseline:.3f} -> {best:.3f}: {accepted} of {len(rounds)} rounds accepted a change; stopped: "
            f"{_STOPPED.get(reason, reason or '?')}; {optimizer.get('lm_calls', 0)} LM calls, "
            f"{float(manifest.get('seconds') or 0.0):.0f} s")


def _still_failing(test: Mapping[str, Any]) -> int:
    if test.get("optimized_accuracy") is None:
        return 0
    return round(int(test.get("questions") or 0) * (1.0 - float(test["optimized_accuracy"])))


def _test_line(test: Mapping[str, Any], run_dir: Path) -> str:
    label = str(test.get("label") or HELD_OUT)  # a manifest written before the label was kept: held out
    if test.get("baseline_accuracy") is None or test.get("optimized_accuracy") is None:
        return f"{label}: no test questions"
    line = (f"{label} {test['baseline_accuracy']:.3f} -> {test['optimized_accuracy']:.3f} on "
            f"{test.get('questions')} questions")
    if label == SAME_CONVERSATION:
        line += f" ({NOT_HELD_OUT})"
    failing = _still_failing(test)
    blame = test.get("blame") or {}
    if failing and blame.get("ops"):
        line += f"; {failing} still fail, blamed by {blame.get('method')} on {counts_text(blame['ops'])}"
    elif failing:
        line += (f"; {failing} still fail, not attributed by optimize: `memtrace attribute {run_dir}` then "
                 f"`memtrace report {run_dir}` blame them")
    return line


def _look_line(run_dir: Path, has_rounds: bool, failing: int, report_written: bool) -> str:
    report = RunDir(run_dir).report_path
    if not report_written:
        return f"{report} was not written: `memtrace report {run_dir}` writes it"
    places = []
    if has_rounds:
        places.append(f"{report}#{ROUNDS_ANCHOR} (each round's candidates, scores and why; the accepted diffs)")
    if failing:
        places.append(f"{report if not places else ''}#{FAILURES_ANCHOR} (the failed test questions)")
    return "see " + (", ".join(places) or f"{report}")
