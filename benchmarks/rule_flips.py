"""Which recorded verdicts a change of the token rule flips: every LoCoMo question of the given run or bench
directories (any directory holding cases.jsonl with gold and prediction) scored by the rule before the change
and after it, each flip listed. `--since` names the change:

- `content-words` (the default): token-rule-v1 with every gold token required (`gold_words="all"`) against
  token-rule-v1 as it is (every gold content word). Only wrong -> right flips can happen (an answer holding
  every gold token holds every content word);
- `token-rule-v1`: token-rule-v1 against the current rule (`metrics.TOKEN_RULE`: dates in another written form;
  another date, or a bare number for a number with a unit, never right). Flips go both ways;
- `token-rule-v2`: token-rule-v2 against the current rule (a date of the gold's read in the gold's form for the
  lexical test). Only wrong -> right flips can happen.

    python benchmarks/rule_flips.py runs/mem0-locomo runs/bench-attribution-*/locomo
    python benchmarks/rule_flips.py runs/* --all-datasets --since token-rule-v1 --out flips.md

A wrong -> right flip was a failure attribution blamed some op for: a right answer the metric called wrong
(GoldError). Exit status 0; 2 when no directory holds cases.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.data import Question
from memtrace_opt.metrics import RULES, TOKEN_RULE, AnswerScore, score_answer

__all__ = ["CHANGES", "Flip", "flips_in", "main"]

# what each change compares: (the verdict before, the verdict after)
CHANGES: dict[str, tuple[Callable[[Question, str], AnswerScore], Callable[[Question, str], AnswerScore]]] = {
    "content-words": (lambda q, p: score_answer(q, p, gold_words="all", rule=RULES[0]),
                      lambda q, p: score_answer(q, p, rule=RULES[0])),
    RULES[0]: (lambda q, p: score_answer(q, p, rule=RULES[0]), lambda q, p: score_answer(q, p, rule=TOKEN_RULE)),
    RULES[1]: (lambda q, p: score_answer(q, p, rule=RULES[1]), lambda q, p: score_answer(q, p, rule=TOKEN_RULE)),
}


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


def flips_in(path: Path, all_datasets: bool = False, since: str = "content-words") -> tuple[int, list[Flip]]:
    """(LoCoMo questions scored, their flips under the change `since`, a key of `CHANGES`) of one cases.jsonl."""
    before, after = CHANGES[since]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    scored, found = 0, []
    for row in rows:
        if not all_datasets and "locomo" not in str(row.get("dataset") or "").lower():
            continue
        question, prediction = _question(row), str(row.get("prediction") or "")
        scored += 1
        now = after(question, prediction)
        if before(question, prediction).correct_by_rule != now.correct_by_rule:
            found.append(Flip(str(path), question.question_id, question.category, question.answer, prediction,
                              round(now.f1, 3), now.correct_by_rule))
    return scored, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", default=["runs/*", "runs/*/*"], help="run or bench directories (globs)")
    parser.add_argument("--all-datasets", action="store_true", help="every question, not only LoCoMo's")
    parser.add_argument("--since", choices=tuple(CHANGES), default="content-words",
                        help="the change of the rule to list the flips of (module doc)")
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
        scored, found = flips_in(file, args.all_datasets, args.since)
        total += scored
        flipped += len(found)
        print(f"{file}: {scored} questions, {len(found)} flipped")
        lines += [f"| {f.file} | {f.question_id} | {f.category} | {f.gold} | {f.prediction} | {f.f1} | "
                  f"{'right' if f.after else 'wrong'} |" for f in found]
    change = "the content-word test" if args.since == "content-words" else f"{TOKEN_RULE} (since {args.since})"
    text = f"{flipped} of {total} verdicts flip under {change}\n\n" + "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
