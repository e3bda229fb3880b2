"""What worked examples are worth to the answer step, by kind: the program scored with demo sets drawn from the
training questions' answer calls, each whole and cut to the lines around its answer (`demo_context.py`).

Kinds: the step's own calls that answered right (the best answers by token F1 first), as our loop's demos
candidate and BootstrapFewShot take them; and calls that answered wrong, shown with the gold answer instead
(a labelled example of the very mistake). Their training scores say little (a demo shows the answer to its own
question); validation and, with --test, held-out questions say what they carry over. Nothing here feeds an
optimizer: it measures the candidates an optimizer would choose among.

    python benchmarks/bench_demos.py --system long_context --sessions 1-2 --train conv-26 --val conv-30 \\
        --test conv-41,conv-42,conv-43,conv-44,conv-47,conv-49,conv-50 --per-split 100
"""

from __future__ import annotations

import argparse
import logging
import sys
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


def answer_calls(evaluation: Any, memo: Any, predictor: str) -> list[tuple[Any, str, str]]:
    """(case, recorded prompt, reply) of the call that wrote each case's answer."""
    from memtrace_opt.attribution import GraphView
    from memtrace_opt.optimizers.evaluation.blame import op_seq
    from memtrace_opt.optimizers.evaluation.evidence import GraphCache, op_event

    graphs = GraphCache(evaluation)
    out = []
    for case in evaluation.cases:
        graph = graphs.get(case.conversation_key)
        op = GraphView(graph).answer_op(case.case_id)
        seq = op_seq(op)
        if op is None or seq is None or graph.nodes[op].get("predictor") != predictor:
            continue
        event = op_event(evaluation, case.conversation_key, seq)
        exchange = memo.exchange(event.content_key) if event is not None else None
        if exchange is not None:
            out.append((case, exchange.prompt, exchange.response))
    return out


def demo_sets(signature: Any, calls: list[tuple[Any, str, str]], embedder: str | None) -> dict[str, list[dict[str, str]]]:
    """Label -> demo list, for each kind and size measured."""
    from memtrace_opt.metrics import CORRECT_F1
    from memtrace_opt.optimizers.sources.demos import compacted, demo_from_exchange

    right, wrong = [], []
    for case, prompt, reply in calls:
        demo = demo_from_exchange(signature, prompt, reply)
        if demo is None:
            continue
        f1 = float(case.score.scores.get("f1") or 0.0)
        if case.correct and f1 > CORRECT_F1:
            right.append((f1, case, demo))
        elif not case.correct:
            wrong.append((f1, case, {**demo, **dict.fromkeys(signature.output_fields, case.question.answer)}))
    right.sort(key=lambda item: -item[0])

    def cut(items: list[tuple[float, Any, dict[str, str]]]) -> list[dict[str, str]]:
        inputs = list(signature.input_fields)
        return [compacted(demo, inputs, case, embedder,
                          query=" ".join([case.question.question, *(demo[name] for name in signature.output_fields)]))
                for _, case, demo in items]

    return {
        "right x2, whole": [demo for _, _, demo in right[:2]],
        "right x2, compact": cut(right[:2]),
        "right x4, compact": cut(right[:4]),
        "right, all, compact": cut(right),
        "wrong with the gold x4, compact": cut(wrong[:4]),
        "right x2 + wrong with the gold x2, compact": cut(right[:2]) + cut(wrong[:2]),
    }


@usage_errors
def main(argv: list[str] | None = None) -> int:
    from memtrace_opt.optimizers.comparison.paired import paired_delta
    from memtrace_opt.optimizers.core.program_io import instructions_of, with_instruction
    from memtrace_opt.optimizers.sources.demos import demo_size
    from memtrace_opt.programs import make_program

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", required=True)
    parser.add_argument("--embedder", default="minilm",
                        help="ranks the lines most like a question that has no evidence ids (none: BM25 alone)")
    add_split_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    program = make_program(args.system)
    predictor = answer_predictor(program)
    if predictor is None:
        parser.error(f"{args.system} has no answer predictor")
    signature = dict(program.named_predictors())[predictor].signature
    cases = split_cases(load_splits(args))
    evaluator = task_evaluator(args)

    seed_results = {split: evaluator.evaluate(program, refs) for split, refs in cases.items()}
    embedder = None if args.embedder.lower() in ("", "none") else args.embedder
    sets = demo_sets(signature, answer_calls(seed_results["train"], evaluator.memo, predictor), embedder)
    print(f"{args.system}, {predictor}: demos from {len(cases['train'])} training questions; "
          f"fixed / broken against no demos\n")
    print("| demos | chars | " + " | ".join(f"{split} accuracy | fixed / broken | mean F1" for split in cases) + " |")
    print("|---|---|" + "---|---|---|" * len(cases))
    for label, demos in {"none": [], **sets}.items():
        candidate = with_instruction(program, predictor, instructions_of(program)[predictor], demos)
        cells = [label, f"{sum(map(demo_size, demos)):,}"]
        for split, refs in cases.items():
            progress.stage(f"demos {label}: {split}")
            result = seed_results[split] if not demos else evaluator.evaluate(candidate, refs)
            moved = paired_delta(seed_results[split].correctness(), result.correctness(), seed=args.seed).cells()[0]
            cells += [f"{result.accuracy:.3f}", moved, f"{result.mean_f1:.3f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(with_progress(main))
