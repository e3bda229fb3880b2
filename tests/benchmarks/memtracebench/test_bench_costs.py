"""The cost of a method per case: the attributor's questions apart from the task model's replayed calls, and how the
upstream verdicts stood after the replays."""

from __future__ import annotations

import io

from rich.console import Console

from memtrace_opt.attribution import Cost, Replay, Verdict
from memtrace_opt.benchmarks.memtracebench import BenchCase, Label, score_tables, score_verdicts
from memtrace_opt.benchmarks.memtracebench.costs import CaseCosts, Confirmation

KINDS = {"c1": ("ExtractionError", "op:3"), "c2": ("RetrievalError", "op:5"), "c3": ("ResponseError", "op:9"),
         "c4": ("UpdateError", "op:4")}
#: an older verdict line: no replay fields in its cost, no confirmed
OLDER_LINE = {"case_id": "c4", "method": "graphtrace", "error_type": "UpdateError", "op_id": "op:4", "op": "decide",
              "predictor": None, "reason": "kept the old city", "confidence": 0.7, "error": None,
              "cost": {"lm_calls": 3, "prompt_tokens": 900, "completion_tokens": 60, "seconds": 1.0}}


def cases() -> list[BenchCase]:
    return [BenchCase(cid, "mem0", "d", "s", f"q{cid}", "Where does Tomas keep his kayak?", "the boathouse", "garage",
                      (), "g.json", Label(kind, op, "x", "injected")) for cid, (kind, op) in KINDS.items()]


def verdict(cid: str, cost: Cost, confirmed: bool | None = None, replays: tuple[Replay, ...] = ()) -> Verdict:
    kind, op = KINDS[cid]
    return Verdict(cid, "graphtrace", kind, op, "x", None, "because", 0.8, cost, None, confirmed, replays)


def replayed_verdicts() -> list[Verdict]:
    """Attributor calls 4, 6, 5, 3 (median 4.5); replayed calls 6, 10, 4, 0 (median 5, total 20): together the
    median would be 9.5. Upstream verdicts: one confirmed, one rejected, one untested (the older line)."""
    tried = (Replay(None, None, "garage", False), Replay("op:3", "x", "the boathouse", True))
    return [verdict("c1", Cost(4, 2000, 100, 2.0, 6, 3000, 90), True, tried),
            verdict("c2", Cost(6, 3000, 200, 3.0, 10, 5000, 150), False, tried),
            verdict("c3", Cost(5, 2500, 150, 2.0, 4, 2000, 60), None, tried),  # the answer op: not upstream
            Verdict.from_dict(OLDER_LINE)]


def test_verdicts_with_replays_give_the_split_columns() -> None:
    costs = score_verdicts("graphtrace", cases(), replayed_verdicts()).costs
    assert (costs.median_lm_calls, costs.total_lm_calls, costs.median_tokens) == (4.5, 18, 2375.0)
    assert (costs.median_replay_calls, costs.total_replay_calls, costs.total_replay_tokens) == (5, 20, 10300)
    assert costs.confirmation == Confirmation(confirmed=1, rejected=1, untested=1)
    assert costs.to_dict()["confirmed"] == {"true": 1, "false": 1, "none": 1, "upstream": 3, "share": 0.3333}


def test_an_older_verdict_line_reads_as_no_replay() -> None:
    older = Verdict.from_dict(OLDER_LINE)
    assert (older.cost.lm_calls, older.cost.replay_calls, older.cost.replay_tokens, older.confirmed) == (3, 0, 0, None)
    costs = CaseCosts.of([older])
    assert (costs.median_lm_calls, costs.total_replay_calls, costs.confirmation.untested) == (3, 0, 1)
    assert not costs.replayed


def _rows(table) -> dict[str, list[str]]:
    """The table's rows as cells, by method."""
    console = Console(record=True, width=250, file=io.StringIO())
    console.print(table)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in console.export_text().splitlines() if "│" in line]
    return {row[0]: row for row in rows}


def test_the_accuracy_table_shows_the_replays_beside_the_attributors_calls() -> None:
    scores = [score_verdicts("graphtrace", cases(), replayed_verdicts()),
              score_verdicts("lineage", cases(), [Verdict.from_dict({**OLDER_LINE, "method": "lineage"})])]
    table = score_tables(scores)[0]
    rows = _rows(table)
    header = [c.header for c in table.columns]
    at = {name: header.index(name) for name in ("LM calls", "tokens", "replayed calls", "confirmed")}
    graphtrace, lineage = rows["graphtrace"], rows["lineage"]
    # the attributor's mean calls and tokens (18 / 4 cases, 8910 / 4), the replays apart
    assert [graphtrace[at[k]] for k in at] == ["4.5", "2228", "5 / 20", "33% (1 / 1 / 1)"]
    assert [lineage[at[k]] for k in at] == ["0.8", "240", "-", "-"]  # an older line: no replay, nothing to show
