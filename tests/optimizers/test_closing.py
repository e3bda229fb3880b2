"""The closing lines of `memtrace optimize`, written from a manifest built of constructed round records."""

from __future__ import annotations

from pathlib import Path

from memtrace_opt.optimizers.closing import FAILURES_ANCHOR, MAX_ROUND_LINES, ROUNDS_ANCHOR, closing_lines
from memtrace_opt.optimizers.loop.records import CandidateRecord, RoundRecord
from memtrace_opt.optimizers.loop.story import rounds_lines

EXTRACT = "extract_facts.predict"
ANSWER = "answer.predict"
ACCEPTED_WHY = "accepted: valset 0.500 > current 0.250"
REJECTED_WHY = "rejected: valset 0.250 does not improve on the current 0.500"


def accepted_round() -> RoundRecord:
    return RoundRecord(
        round=1, blame_counts={EXTRACT: 2, ANSWER: 1}, not_fixable={"mem0.retrieve": 1}, chosen_predictor=EXTRACT,
        previous_instruction="Extract facts.",
        candidates=[
            CandidateRecord("Extract dated facts.", 0.75, 0.375, False, "passed, but candidate 3 is taken",
                            origin="reflection"),
            CandidateRecord("Extract facts. Keep dates.", None, None, False, "local check: fixed 0 of 2",
                            local={"blamed": 2, "fixed": 0, "kept": 1, "broken": 0, "lm_calls": 3},
                            origin="pattern:date_form"),
            CandidateRecord("Extract dated facts.", None, 0.5, True, ACCEPTED_WHY, demos=[{"q": "a"}],
                            origin="combined"),
        ],
        accepted=True, val_accuracy=0.5, lm_calls=30,
        repairs={"tried": 2, "no_repair": 1, "confirmed": 1, "kept": 1, "lineage_rejected": 0, "lm_calls": 4},
    )


def rejected_round() -> RoundRecord:
    return RoundRecord(
        round=2, blame_counts={ANSWER: 2}, not_fixable={"unattributed": 1}, chosen_predictor=ANSWER,
        previous_instruction="Answer.",
        candidates=[
            CandidateRecord("Answer briefly.", 0.5, 0.25, False, REJECTED_WHY, origin="reflection"),
            CandidateRecord("Answer.", 0.25, None, False, "not validated: candidate 1 goes first", demos=[{"q": "b"}]),
        ],
        accepted=False, val_accuracy=0.5, lm_calls=20,
    )


def unattributable_round() -> RoundRecord:
    return RoundRecord(round=3, blame_counts={}, not_fixable={"unattributed": 1, "GoldError": 1},
                       chosen_predictor=None, previous_instruction=None, candidates=[], accepted=False,
                       val_accuracy=0.5, lm_calls=5)


def manifest(rounds: list[RoundRecord], *, optimized: float = 0.5) -> dict:
    return {
        "baseline": {"val_accuracy": 0.25},
        "rounds": [r.to_dict() for r in rounds],
        "optimizer": {"stop_reason": "plateau", "best_val_accuracy": 0.5, "lm_calls": 55},
        "test": {"baseline_accuracy": 0.25, "optimized_accuracy": optimized, "questions": 4},
        "seconds": 61.0,
    }


def test_the_lines_say_what_was_blamed_tried_accepted_and_where_to_look():
    lines = closing_lines(manifest([accepted_round(), rejected_round(), unattributable_round()]), Path("runs/q"),
                          report_written=True)
    assert 4 <= len(lines) <= 8
    blamed, first, second, third, val, test, look = lines
    # blame summed over the rounds, most blamed first; what no prompt can fix, with why
    assert blamed.startswith("blamed: 9 training-minibatch failures over 3 rounds: answer.predict 3, "
                             f"{EXTRACT} 2;")
    assert "2 unattributed (attribution found no root cause)" in blamed
    assert "1 at mem0.retrieve (an op with no prompt)" in blamed and "1 GoldError" in blamed
    # round 1: every origin with its scores, and the accepted one with the gate's why
    assert first.startswith(f"round 1, {EXTRACT}: tried reflection 0.750, pattern:date_form (local check fixed 0/2)")
    assert "validated reflection 0.375, combined 0.500" in first
    assert f"combined {ACCEPTED_WHY}" in first and "nothing accepted" not in first
    assert first.endswith("repairs: tried 2, no_repair 1, confirmed 1, kept 1, lm_calls 4")
    # round 2: nothing accepted, and why: the candidate that got furthest (the validated one), not the demos
    assert second.startswith(f"round 2, {ANSWER}: tried reflection 0.500, demos 0.250 (minibatch)")
    assert second.endswith(f"nothing accepted (reflection {REJECTED_WHY})") and "repairs" not in second
    assert third == "round 3: nothing to rewrite, no failure blamed on a predictor"
    assert val.startswith("valset 0.250 -> 0.500: 1 of 3 rounds accepted a change; stopped: plateau")
    assert test.startswith("held-out test 0.250 -> 0.500 on 4 questions; 2 still fail")
    assert "`memtrace attribute runs/q`" in test
    report = Path("runs/q") / "report.html"
    assert look.startswith(f"see {report}#{ROUNDS_ANCHOR} ") and f", #{FAILURES_ANCHOR} " in look


def test_no_rounds_and_no_report_point_at_the_command_that_writes_it():
    lines = closing_lines(manifest([], optimized=1.0), Path("out"), report_written=False)
    assert lines[0] == "blamed: nothing, no round finished"
    assert "still fail" not in lines[-2]
    assert lines[-1] == f"{Path('out') / 'report.html'} was not written: `memtrace report out` writes it"


def test_many_rounds_keep_the_accepted_and_the_last_and_share_one_line_for_the_rest():
    rounds = [RoundRecord.from_dict({**rejected_round().to_dict(), "round": n}) for n in range(1, 7)]
    rounds[1] = RoundRecord.from_dict({**accepted_round().to_dict(), "round": 2})
    lines = closing_lines(manifest(rounds), Path("r"), report_written=True)
    assert len(rounds) > MAX_ROUND_LINES and len(lines) <= 8
    assert lines[1] == "rounds 1, 3, 4, 5: nothing accepted"
    assert lines[2].startswith(f"round 2, {EXTRACT}:") and lines[3].startswith(f"round 6, {ANSWER}:")


def test_a_round_that_changed_settings_says_from_what_to_what():
    record = RoundRecord.from_dict({**accepted_round().to_dict(), "settings_changed": {"window_turns": [6, 4]}})
    lines = closing_lines(manifest([record]), Path("runs/s"), report_written=True)
    first = next(line for line in lines if line.startswith("round 1"))
    assert "settings window_turns 6 -> 4" in first


def test_compare_md_tells_every_round_of_our_rows_and_the_round_the_budget_cut():
    from memtrace_opt.optimizers.comparison.compare import CompareRow, CompareSummary

    rounds = [RoundRecord.from_dict({**rejected_round().to_dict(), "round": n}) for n in range(1, 7)]
    cut = RoundRecord.from_dict({**rejected_round().to_dict(), "round": 7, "candidates": [], "phase": "proposals"})
    ours = CompareRow("memtrace", 0.25, 0.25, 400, 0, 9.0, stopped_by_budget=True, stopped_by="calls",
                      details={"baseline": {"val_accuracy": 0.5}, "rounds": [r.to_dict() for r in rounds],
                               "interrupted": cut.to_dict()})
    table = CompareSummary(Path("cmp"), [ours, CompareRow("gepa", 0.25, 0.25, 400, 0, 9.0)], 0.25, 4).markdown("t")
    story = table.split("What our loop's rounds did")[1].splitlines()
    assert "- memtrace:" in story and not any("gepa" in line for line in story)
    told = [line for line in story if line.startswith("  - round ")]
    # every round gets its line in the table (the closing lines share one for the rounds that accepted nothing)
    assert len(rounds) > MAX_ROUND_LINES and [line.split(",")[0] for line in told[:6]] == [
        f"  - round {n}" for n in range(1, 7)]
    assert told[-1].startswith("  - round 7 cut short while proposing (the LM-call budget;")


def test_a_round_scored_on_the_minibatch_beside_a_local_set_for_its_repairs_says_so():
    """Without the local objective a round may still build a local set, only to confirm its repairs on: its
    candidates were checked and scored on the minibatch, and the line says that, not net targets."""
    record = RoundRecord(
        round=1, blame_counts={EXTRACT: 3}, not_fixable={}, chosen_predictor=EXTRACT, previous_instruction="Extract.",
        candidates=[
            CandidateRecord("Extract.", 0.5, 0.25, False, REJECTED_WHY, origin="repair", demos=[{"q": "a"}],
                            local={"blamed": 3, "fixed": 1, "kept": 0, "broken": 0, "lm_calls": 3, "targets": 1}),
            CandidateRecord("Extract, dated.", None, None, False, "rejected by the local check: 0 of 3",
                            local={"blamed": 3, "fixed": 0, "kept": 0, "broken": 0, "lm_calls": 3, "targets": 1},
                            origin="reflection"),
        ],
        accepted=False, val_accuracy=0.5, lm_calls=40,
        local_set={"calls": 17, "targets": 38, "seed_carried": 12},
    )
    line = rounds_lines(manifest([record]), None, "plateau")[1]
    assert f"round 1, {EXTRACT} (local set: 17 calls, 38 targets, the seed carries 12): tried repair 0.500, " \
           "reflection (local check fixed 0/3) (minibatch)" in line, line
    assert "net targets" not in line and "None/" not in line
