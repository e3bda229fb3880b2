"""How much each sentence of one predictor's instruction is worth: the program scored with each sentence left out
in turn, and with the first sentence (the step's job) alone, against the instruction as it is.

A rewrite that helps by dropping a rule is found here without a reflection model: if leaving a rule out answers
more questions right on both training and validation questions, the rule costs the model more than it gives. With
DSPy's cache on, a second run of the same arguments reads its answers from the first.

    python benchmarks/bench_ablation.py --system long_context --sessions 1-2 --train conv-26 --val conv-30 \\
        --per-split 100
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from itertools import pairwise
from typing import Any

from memtrace_opt import progress
from memtrace_opt.benchmarks.progress_display import with_progress
from memtrace_opt.benchmarks.split_args import (
    add_split_arguments,
    answer_predictor,
    load_splits,
    split_cases,
    task_evaluator,
    usage_errors,
)

# a sentence ends at . ! or ? before a space, or at a line break before a capital letter ("reply: None\nOtherwise")
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n(?=[A-Z])")


def sentences(text: str) -> list[str]:
    """The sentences of an instruction, each as written (its line breaks kept)."""
    return [part.strip() for part in _BOUNDARY.split(text.strip()) if part.strip()]


def variants(text: str) -> list[tuple[str, str]]:
    """(label, instruction) for the instruction itself, each sentence after the first left out, and the first
    alone. Sentences are joined by a line break where the original broke the line between them, else a space."""
    parts = sentences(text)
    if len(parts) < 2:
        return [("as it is", text)]

    def joined(kept: list[int]) -> str:
        out = parts[kept[0]]
        for before, index in pairwise(kept):
            gap = "\n" if f"{parts[before]}\n" in text else " "
            out += gap + parts[index]
        return out

    everything = list(range(len(parts)))
    found = [("as it is", text)]
    for i in everything[1:]:
        found.append((f"without: {_short(parts[i])}", joined([k for k in everything if k != i])))
    found.append(("the first sentence alone", parts[0]))
    return found


def _short(sentence: str, limit: int = 60) -> str:
    flat = " ".join(sentence.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


@usage_errors
def main(argv: list[str] | None = None) -> int:
    from memtrace_opt.optimizers.comparison.paired import paired_delta
    from memtrace_opt.optimizers.core.program_io import instructions_of, with_instruction
    from memtrace_opt.programs import make_program

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", required=True)
    parser.add_argument("--predictor", default=None,
                        help="the predictor whose instruction is cut (default: the answer step's)")
    add_split_arguments(parser, test=False)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    program = make_program(args.system)
    instructions = instructions_of(program)
    predictor = args.predictor or answer_predictor(program)
    if predictor not in instructions:
        parser.error(f"no predictor {predictor!r}; {args.system} has: {', '.join(sorted(instructions))}")
    cases = split_cases(load_splits(args))
    evaluator = task_evaluator(args)

    print(f"{args.system}, {predictor}: {len(cases['train'])} training and {len(cases['val'])} validation "
          f"questions; fixed / broken against the instruction as it is\n")
    print("| instruction | train accuracy | train fixed / broken | val accuracy | val fixed / broken | val mean F1 "
          "| val words |")
    print("|---|---|---|---|---|---|---|")
    seed_results: dict[str, Any] = {}
    for label, text in variants(instructions[predictor]):
        candidate = with_instruction(program, predictor, text)
        cells = []
        for split, refs in cases.items():
            progress.stage(f"{label}: {split}")
            result = evaluator.evaluate(candidate, refs)
            base = seed_results.setdefault(split, result)
            fixed_broken = paired_delta(base.correctness(), result.correctness(), seed=args.seed).cells()[0]
            cells += [f"{result.accuracy:.3f}", fixed_broken]
            if split == "val":
                cells += [f"{result.mean_f1:.3f}", f"{result.mean_words:.1f}"]
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(with_progress(main))
