"""Does the local objective predict validation? Every candidate of every memtrace row that was both scored on its
round's local set and validated: its local net targets (fixed less lost, on the last rung it reached) beside its
validation change (its valset accuracy less the program's before the round), as a table and a Spearman rank
correlation (ties ranked by their mean). A candidate validated again unchanged (a later round of the same program
proposing the same instruction and demos) is one candidate: it is counted once.

    python benchmarks/local_vs_val.py runs/bench-rag/rag runs/bench-mem0/mem0 --out runs/local-vs-val.md

Each argument is a comparison directory (its compare.json) or a compare.json itself; rows whose optimizer is not one
of our loop's are skipped.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Pair:
    """One candidate scored locally and validated."""

    source: str  # the table and row it came from
    round: int
    origin: str
    local_gain: int
    local_calls: int
    val_change: float
    accepted: bool
    repeat: bool = False  # the same candidate, on the same program, as one listed before it


def pairs_of(table: dict[str, Any], name: str) -> list[Pair]:
    """The candidates of `table`'s memtrace rows scored on the local set and validated."""
    out: list[Pair] = []
    for row in table.get("rows") or []:
        details = row.get("details") or {}
        rounds = details.get("rounds") or []
        if not str(row.get("optimizer", "")).startswith("memtrace") or not rounds:
            continue
        seen: set[str] = set()
        current = float((details.get("baseline") or {}).get("val_accuracy") or 0.0)
        for record in rounds:
            keys: set[str] = set()
            for candidate in record.get("candidates") or []:
                local, val = candidate.get("local") or {}, candidate.get("val_score")
                if val is None or not {"fixed", "lost", "targets"} <= local.keys():
                    continue  # not validated, or a local check's counts (`--no-local-objective`: blamed, fixed,
                    # broken, kept, targets), not a local score
                key = json.dumps([record.get("chosen_predictor"), candidate.get("instruction"), candidate.get("demos"),
                                  current], sort_keys=True)
                out.append(Pair(f"{name}:{row['optimizer']}", int(record["round"]), str(candidate.get("origin") or "demos"),
                                int(local["fixed"]) - int(local["lost"]), int(local.get("calls") or 0),
                                round(float(val) - current, 6), bool(candidate.get("accepted")), key in seen))
                keys.add(key)
            seen |= keys  # a repeat is one validated in an earlier round
            if record.get("accepted"):
                current = float(record["val_accuracy"])
    return out


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties given the mean of the ranks they share."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation (None with fewer than three pairs, or when either side is constant)."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx, sy = math.sqrt(sum((a - mx) ** 2 for a in rx)), math.sqrt(sum((b - my) ** 2 for b in ry))
    return None if sx == 0 or sy == 0 else cov / (sx * sy)


def report(listed: Sequence[Pair]) -> str:
    pairs = [p for p in listed if not p.repeat]
    repeats = len(listed) - len(pairs)
    lines = ["| row | round | origin | local net targets (calls) | validation change | accepted |", "|---|---|---|---|---|---|"]
    lines += [f"| {p.source} | {p.round} | {p.origin} | {p.local_gain:+d} ({p.local_calls}) | {p.val_change * 100:+.1f} pts | "
              f"{'yes' if p.accepted else 'no'} |" for p in pairs]
    rho = spearman([p.local_gain for p in pairs], [p.val_change for p in pairs])
    positive = [p for p in pairs if p.local_gain > 0]
    lines += ["", f"{len(pairs)} candidates scored locally and validated; Spearman's rho "
                  f"{'n/a (fewer than three, or one side constant)' if rho is None else f'{rho:+.2f}'}; of the "
                  f"{len(positive)} that gained locally, {sum(p.val_change > 0 for p in positive)} gained on the valset"
              + (f"; {repeats} validated again unchanged in a later round, counted once" if repeats else "")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tables", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    pairs: list[Pair] = []
    for path in args.tables:
        file = path / "compare.json" if path.is_dir() else path
        if not file.is_file():
            parser.error(f"{file}: no compare.json")
        pairs += pairs_of(json.loads(file.read_text(encoding="utf-8")), file.parent.name)
    text = report(pairs)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
