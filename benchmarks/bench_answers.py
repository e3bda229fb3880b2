"""The held-out answers of a finished comparison, scored again: accuracy under the token rule, mean token F1 and
words per answer, for the unoptimized program and each program the comparison saved.

The token rule counts an answer that holds every gold word as right, however long it is; F1 does not. A gain in
accuracy that comes with longer answers and a lower F1 is the answers growing, not the program knowing more.
`memtrace compare` records these figures for new runs (compare.json `answers`); this script gives them for a run
made before, or for any saved program. Pass the split arguments the comparison ran with; with DSPy's cache on,
the answers come from that run's cache. With --questions it then lists the held-out questions that some
program gets wrong, with the gold and every program's answer: what is left to fix, and which misses are the
metric's (a numeral against a gold number word, a gold string with its spaces lost).

    python benchmarks/bench_answers.py runs/cmp/long_context --system long_context --sessions 1-2 \\
        --train conv-26 --val conv-30 --test conv-41,conv-42 --per-split 100
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from memtrace_opt import progress
from memtrace_opt.benchmarks.progress_display import with_progress
from memtrace_opt.benchmarks.split_args import add_split_arguments, load_splits, task_evaluator, usage_errors


@usage_errors
def main(argv: list[str] | None = None) -> int:
    from memtrace_opt.optimizers.comparison.compare import AnswerShape
    from memtrace_opt.optimizers.comparison.paired import paired_delta
    from memtrace_opt.optimizers.core.program_io import load_optimized
    from memtrace_opt.optimizers.evaluation.examples import case_refs, make_examples
    from memtrace_opt.programs import make_program

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("compare_dir", type=Path, help="a comparison's output: its programs/<optimizer>.json are read")
    parser.add_argument("--system", required=True)
    parser.add_argument("--questions", action="store_true",
                        help="then list each held-out question some program gets wrong: the gold and every answer")
    add_split_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    programs = sorted((args.compare_dir / "programs").glob("*.json"))
    if not programs:
        parser.error(f"{args.compare_dir / 'programs'}: no saved programs")
    splits = load_splits(args)
    cases = case_refs(make_examples(splits.test))
    evaluator = task_evaluator(args)
    before = evaluator.evaluate(make_program(args.system), cases)
    print(f"{len(cases)} held-out questions; unoptimized: accuracy {before.accuracy:.3f}, mean F1 "
          f"{before.mean_f1:.3f}, {before.mean_words:.1f} words per answer; accuracy by {evaluator.metric.name}\n")
    print("| program | accuracy | fixed / broken | mean F1 | words |")
    print("|---|---|---|---|---|")
    results = {}
    for path in programs:
        progress.stage(f"{path.stem}: held-out test")
        after = results[path.stem] = evaluator.evaluate(load_optimized(path), cases)
        paired = paired_delta(before.correctness(), after.correctness(), seed=args.seed)
        f1, words = AnswerShape.of(before, after).cells()
        print(f"| {path.stem} | {before.accuracy:.3f} → {after.accuracy:.3f} | {paired.cells()[0]} | {f1} | {words} |",
              flush=True)
    if args.questions:
        print_questions(before, results)
    return 0


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "/")


def print_questions(before: Any, results: dict[str, Any]) -> None:
    """A table of the held-out questions that the unoptimized program or any saved one gets wrong; each answer is
    marked right or wrong by the token rule."""
    print(f"\n| question | gold | unoptimized | {' | '.join(results)} |")
    print("|---|---|---" + "|---" * len(results) + "|")
    for i, case in enumerate(before.cases):
        row = [case, *(result.cases[i] for result in results.values())]
        if all(c.correct for c in row):
            continue
        answers = " | ".join(f"{'✓' if c.correct else '✗'} {_cell(c.prediction)}" for c in row)
        print(f"| {_cell(case.question.question)} | {_cell(case.question.answer)} | {answers} |")


if __name__ == "__main__":
    sys.exit(with_progress(main))
