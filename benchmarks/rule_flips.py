"""Which recorded verdicts the token rule's content-word test flips: every LoCoMo question of the given run or
bench directories (any directory holding cases.jsonl with gold and prediction) scored by the rule before the
change (every gold token must be in the answer) and after it (every gold content word), each flip listed.

    python benchmarks/rule_flips.py runs/mem0-locomo runs/bench-attribution-*/locomo
    python benchmarks/rule_flips.py runs/* --all-datasets --out flips.md

Only wrong -> right flips can happen (an answer holding every gold token holds every content word). A flipped
question was a failure attribution blamed some op for: a right answer the metric called wrong (GoldError).
Exit status 0; 2 when no directory holds cases.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.data import Question
from memtrace_opt.metrics import score_answer

__all__ = ["Flip", "flips_in", "main"]


@dataclass(frozen=True)
class Flip:
    file: str
    question_id: str
    category: str
    gold: str
    prediction: str
    f1: float
    after: bool  # right by the rule now (before it was the opposite)


def _question(row: dict[str, Any]) -> Question:
    return Question(str(row.get("question_id")), str(row.get("question") or ""), str(row.get("gold") or ""),
                    str(row.get("category") or ""), None, tuple(row.get("evidence") or ()),
                    abstention=bool(row.get("abstention", False)))


def flips_in(path: Path, all_datasets: bool = False) -> tuple[int, list[Flip]]:
    """(LoCoMo questions scored, their flips) of one cases.jsonl."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    scored, found = 0, []
    for row in rows:
        if not all_datasets and "locomo" not in str(row.get("dataset") or "").lower():
            continue
        question, prediction = _question(row), str(row.get("prediction") or "")
        scored += 1
        now = score_answer(question, prediction)
        if score_answer(question, prediction, gold_words="all").correct_by_rule != now.correct_by_rule:
            found.append(Flip(str(path), question.question_id, question.category, question.answer, prediction,
                              round(now.f1, 3), now.correct_by_rule))
    return scored, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", default=["runs/*", "runs/*/*"], help="run or bench directories (globs)")
    parser.add_argument("--all-datasets", action="store_true", help="every question, not only LoCoMo's")
    parser.add_argument("--out", type=Path, default=None, help="also write the list as markdown here")
    args = parser.parse_args(argv)
    files = sorted({Path(p) / "cases.jsonl" for pattern in args.dirs for p in glob.glob(pattern)
                    if (Path(p) / "cases.jsonl").is_file()})
    if not files:
        print("no cases.jsonl under " + ", ".join(args.dirs), file=sys.stderr)
        return 2
    lines = ["| cases | question | category | gold | prediction | F1 | now |", "|---|---|---|---|---|---|---|"]
    total = flipped = 0
    for file in files:
        scored, found = flips_in(file, args.all_datasets)
        total += scored
        flipped += len(found)
        print(f"{file}: {scored} questions, {len(found)} flipped")
        lines += [f"| {f.file} | {f.question_id} | {f.category} | {f.gold} | {f.prediction} | {f.f1} | "
                  f"{'right' if f.after else 'wrong'} |" for f in found]
    text = f"{flipped} of {total} verdicts flip under the content-word test\n\n" + "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
