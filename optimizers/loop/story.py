"""What our loop's rounds did, a line each, from their records: the blame summed over the rounds, each round's
chosen predictor, its candidates with their local and validation scores and the decision, and the round a budget
cut short. `memtrace optimize`'s closing lines (`optimizers/closing.py`) and compare.md (`comparison/compare.py`)
tell the rounds with it; a candidate's `why` is shown as the gate recorded it, never parsed.

    lines = rounds_lines(manifest, manifest["optimizer"].get("interrupted"), manifest["optimizer"]["stop_reason"])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from memtrace_opt.attribution import GOLD
from memtrace_opt.optimizers.evaluation.blame import UNATTRIBUTED
from memtrace_opt.optimizers.evaluation.local_set import GOLD_ERROR_TARGETS
from memtrace_opt.optimizers.loop.records import CandidateRecord, RoundPhase, RoundRecord
from memtrace_opt.optimizers.loop.stop import StopReason

__all__ = ["MAX_ROUND_LINES", "counts_text", "rounds_lines"]

MAX_ROUND_LINES = 4  # more rounds: those that accepted a change and the last one get a line, the rest share one

_CUT_BY = {StopReason.BUDGET.value: "the LM-call budget", StopReason.TIME.value: "the time budget"}
_CUT_WHILE = {
    RoundPhase.PLAN: "tracing and attributing",
    RoundPhase.REPAIRS: "repairing",
    RoundPhase.LOCAL_SET: "building the local set",
    RoundPhase.PROPOSALS: "proposing",
    RoundPhase.SETTINGS: "searching settings",
    RoundPhase.CANDIDATES: "scoring candidates",
    RoundPhase.VALIDATION: "validating",
}


def rounds_lines(run: Mapping[str, Any], cut: Mapping[str, Any] | None, stop_reason: str, *,
                 max_lines: int | None = MAX_ROUND_LINES) -> list[str]:
    """What the loop blamed over its rounds, a line a round (`max_lines` None: every round; else rounds past it
    that accepted nothing share one line) and the round `cut` short by `stop_reason` ("budget" or "time"), from
    `run`'s `rounds` and `baseline` (a manifest, or a compare.json row's `details`)."""
    rounds = [RoundRecord.from_dict(r) for r in run.get("rounds") or []]
    lines = [_blame_line(rounds, bool(cut))]
    lines += _round_lines(rounds, float((run.get("baseline") or {}).get("val_accuracy") or 0.0), max_lines)
    if cut:
        lines.append(_cut_line(RoundRecord.from_dict(cut), stop_reason))
    return lines


def counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def _blame_line(rounds: Sequence[RoundRecord], cut: bool) -> str:
    if not rounds:
        return "blamed: no round finished (the round cut short says what it found)" if cut else \
            "blamed: nothing, no round finished"
    blamed: Counter[str] = Counter()
    not_fixable: Counter[str] = Counter()
    for record in rounds:
        blamed.update(record.blame_counts)
        not_fixable.update(record.not_fixable)
    failures = sum(blamed.values()) + sum(not_fixable.values())
    head = f"blamed: {failures} training-minibatch failure{'s' if failures != 1 else ''} over {len(rounds)} " \
           f"round{'s' if len(rounds) != 1 else ''}"
    blame = counts_text(dict(blamed.most_common())) or "no predictor"
    unfixable = ", ".join(_not_fixable(name, n) for name, n in sorted(not_fixable.items())) or "none"
    return f"{head}: {blame}; could not be attributed or fixed by a prompt: {unfixable}"


def _cut_line(cut: RoundRecord, stop_reason: str) -> str:
    """What the round the budget cut short had done: each part of its plan it reached, its candidates scored."""
    phase = cut.phase or RoundPhase.PLAN
    why = (cut.cut or {}).get("why", "")
    spent = f"{cut.seconds:.0f} s and {cut.lm_calls} LM calls into it"
    head = f"round {cut.round} cut short while {_CUT_WHILE[phase]} ({_CUT_BY.get(stop_reason, why)}; {spent})"
    done: list[str] = []
    if phase is not RoundPhase.PLAN or cut.blame_counts:
        done.append(f"blamed {counts_text(cut.blame_counts) or 'nothing'}")
        if cut.not_fixable:
            done.append(f"not fixable by prompts {counts_text(cut.not_fixable)}")
        done.append(f"chose {cut.chosen_predictor}" if cut.chosen_predictor else "no predictor chosen")
    if cut.findings:
        done.append(f"findings: {', '.join(str(f.get('pattern')) for f in cut.findings)}")
    if cut.repairs is not None:
        done.append(f"repairs: {cut.repairs.get('tried', 0)} tried, {cut.repairs.get('kept', 0)} confirmed")
    if cut.local_set is not None:
        local = cut.local_set
        done.append(f"local set {local.get('calls')} calls / {local.get('targets')} targets, seed carries "
                    f"{local.get('seed_carried')}")
    if cut.candidates:
        scored = sum(c.minibatch_score is not None or c.local is not None for c in cut.candidates)
        done.append(f"{len(cut.candidates)} candidates, {scored} scored")
    return f"{head}: {'; '.join(done) or 'nothing attributed yet'}"


def _not_fixable(name: str, n: int) -> str:
    if name == UNATTRIBUTED:
        return f"{n} unattributed (attribution found no root cause)"
    if name == GOLD:
        return f"{n} GoldError (the gold answer is wrong; left out of the training signal)"
    return f"{n} at {name} (an op with no prompt)"


def _round_lines(rounds: Sequence[RoundRecord], baseline: float, max_lines: int | None) -> list[str]:
    shown = rounds if max_lines is None or len(rounds) <= max_lines else [
        r for i, r in enumerate(rounds) if r.accepted or i == len(rounds) - 1]
    left = [r.round for r in rounds if r.round not in {s.round for s in shown}]
    current, before = baseline, {}
    for record in rounds:  # each round's valset accuracy before it: the baseline, or the last accepted round's
        before[record.round] = current
        current = record.val_accuracy if record.accepted else current
    lines = [_round_line(r, before[r.round]) for r in shown]
    if left:
        lines.insert(0, f"rounds {', '.join(map(str, left))}: nothing accepted")
    return lines


def _origin(record: RoundRecord, candidate: CandidateRecord) -> str:
    return candidate.candidate(record.chosen_predictor or "").origin


def _round_line(record: RoundRecord, current: float) -> str:
    head = f"round {record.round}"
    if record.chosen_predictor is None:
        failures = sum(record.blame_counts.values()) + sum(record.not_fixable.values())
        why = ("no failure on its minibatch" if not failures else
               "no failure blamed on a predictor" if not record.blame_counts else "no blamed predictor was chosen")
        return f"{head}: nothing to rewrite, {why}"
    head += f", {record.chosen_predictor}"
    if not record.candidates:
        return f"{head}: no candidate proposed; nothing accepted"
    if record.local_set:  # the local objective's, or (`--no-local-objective`) only the repairs' to be confirmed on
        local = record.local_set
        gold = (local.get("excluded") or {}).get(GOLD_ERROR_TARGETS)
        head += (f" (local set: {local.get('calls')} calls, {local.get('targets')} targets, the seed carries "
                 f"{local.get('seed_carried')}{f'; {gold} GoldError targets left out' if gold else ''})")
    on_minibatch = any(c.minibatch_score is not None or (c.local and not _scored_locally(c)) for c in record.candidates)
    if record.local_set and not on_minibatch:
        tried = ", ".join(_local_tried(record, c) for c in record.candidates if _scored_locally(c))
        kind = "local objective, net targets"
    else:
        tried = ", ".join(_tried(record, c) for c in record.candidates if c.minibatch_score is not None or c.val_score is None)
        kind = "minibatch"
    validated = ", ".join(f"{_origin(record, c)} {c.val_score:.3f}{_gains(c, current)}" for c in record.candidates
                          if c.val_score is not None)
    taken = next((c for c in record.candidates if c.accepted), None)
    if taken is not None:
        verdict = f"{_origin(record, taken)} {taken.why}"
    else:
        furthest = _furthest(record.candidates)
        verdict = f"nothing accepted ({_origin(record, furthest)} {furthest.why})"
    line = (f"{head}: tried {tried or 'none'} ({kind}); "
            f"{f'validated {validated}' if validated else 'none validated'}; {verdict}")
    if record.settings_changed:
        line += "; settings " + ", ".join(f"{name} {old} -> {new}" for name, (old, new) in record.settings_changed.items())
    repairs = sorted(((k, n) for k, n in (record.repairs or {}).items() if n), key=lambda kv: kv[0] != "tried")
    return line + (f"; repairs: {counts_text(dict(repairs))}" if repairs else "")


def _tried(record: RoundRecord, candidate: CandidateRecord) -> str:
    if candidate.minibatch_score is not None:
        return f"{_origin(record, candidate)} {candidate.minibatch_score:.3f}"
    local = candidate.local or {}
    checked = f" (local check fixed {local.get('fixed')}/{local.get('blamed')})" if local else " (not run)"
    return _origin(record, candidate) + checked


def _scored_locally(candidate: CandidateRecord) -> bool:
    """Scored on the local objective (`LocalScore`: what it carried), not only by the local check (`LocalResult`)."""
    return candidate.local is not None and "carried" in candidate.local


def _local_tried(record: RoundRecord, candidate: CandidateRecord) -> str:
    local = candidate.local or {}
    gain = int(local.get("fixed", 0)) - int(local.get("lost", 0))
    extra = f", {local.get('bloat')} bloated" if local.get("bloat") else ""
    return f"{_origin(record, candidate)} {gain:+d} ({local.get('carried')}/{local.get('targets')}{extra})"


def _gains(candidate: CandidateRecord, current: float) -> str:
    """A validated candidate's local gain beside its valset gain."""
    if not _scored_locally(candidate):
        return ""
    local = candidate.local or {}
    gain = int(local.get("fixed", 0)) - int(local.get("lost", 0))
    return f" (local {gain:+d}, valset {(candidate.val_score or 0.0) - current:+.3f})"


def _furthest(candidates: Sequence[CandidateRecord]) -> CandidateRecord:
    """The candidate that got furthest: the best on the valset, else on the minibatch (first of equals), else the
    first."""
    validated = [c for c in candidates if c.val_score is not None]
    if validated:
        return max(validated, key=lambda c: c.val_score or 0.0)
    scored = [c for c in candidates if c.minibatch_score is not None]
    return max(scored, key=lambda c: c.minibatch_score or 0.0) if scored else candidates[0]
