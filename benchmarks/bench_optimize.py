"""Benchmark: our closed loop against DSPy's optimizers, optimized on some LoCoMo conversations and tested on
others never seen during optimization, with the embedded model (or any model given with --lm).

    python benchmarks/bench_optimize.py --out bench-out                      # the full setting below
    python benchmarks/bench_optimize.py --systems rag --sessions 1-2 --per-split 8 --budget 40 \
        --optimizers memtrace,gepa,mipro --out bench-small                   # what fits a small machine

For each system: held-out accuracy before and after, LM calls and calls to reach the best, tokens and wall
time per optimizer at the same LM-call budget (one `memtrace compare` per system). Writes one directory per
system (compare.md / compare.json / compare.png) and bench.md with every table; each row is saved as it
finishes, and `--resume` runs only the optimizers a system's compare.json has no row for. The target of the issue:
>= +10 points held-out and above GEPA and MIPROv2 at equal budget.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from memtrace_opt.benchmarks.progress_display import with_progress
from memtrace_opt.benchmarks.split_args import add_split_arguments, usage_errors


@usage_errors
def main(argv: list[str] | None = None) -> int:
    from memtrace_opt.cli.common import data_slice
    from memtrace_opt.lm.roles import ModelRoles, ModelSpec
    from memtrace_opt.metrics import TOKEN_RULE
    from memtrace_opt.optimizers.comparison.compare import (
        CompareRequest,
        compare_optimizers,
        parse_optimizers,
    )
    from memtrace_opt.optimizers.loop.settings import LoopSettings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default="mem0,rag")
    add_split_arguments(parser)
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--time-budget", type=float, default=None, help="and at most this many seconds per optimizer")
    parser.add_argument("--optimizers", default="memtrace,gepa,mipro,copro,simba,bootstrap,blame_response,gepa_attributed")
    parser.add_argument("--attribution", default="lineage")
    parser.add_argument("--rounds", type=int, default=30,
                        help="rounds of our loop at most (the plateau or the budget ends it first, as for the others)")
    parser.add_argument("--candidates", type=int, default=2)
    parser.add_argument("--minibatch", type=int, default=6)
    parser.add_argument("--patience", type=int, default=2, help="rounds without an accepted change before stopping")
    parser.add_argument("--demos", type=int, default=2,
                        help="our loop's demos candidate: up to N worked examples for the blamed predictor (0: off)")
    parser.add_argument("--demo-pool", type=int, default=24,
                        help="our loop draws demos from the first N training questions too, traced once (0: minibatch only)")
    parser.add_argument("--demo-budget", type=int, default=20000,
                        help="our loop keeps all of the blamed predictor's demos within N characters together")
    parser.add_argument("--full-demos", action="store_true",
                        help="our loop's answer demos keep their whole context (default: the lines around the answer)")
    parser.add_argument("--min-val-gain", type=float, default=0.0,
                        help="our loop accepts a candidate only above the current validation accuracy by more than this")
    parser.add_argument("--min-val-questions", type=int, default=2,
                        help="our loop accepts a candidate only if it answers at least N more validation questions right")
    parser.add_argument("--validate-ties", action="store_true",
                        help="our loop validates a candidate that ties the minibatch (acceptance still needs a gain)")
    parser.add_argument("--no-pattern-rules", action="store_true",
                        help="our loop without the diagnosed patterns' rules in the proposal slots (ablation)")
    parser.add_argument("--no-local-check", action="store_true",
                        help="our loop without the local check of candidates on the blamed calls (ablation)")
    parser.add_argument("--resume", action="store_true",
                        help="keep each system's finished rows (its compare.json, same setting) and run only the rest")
    parser.add_argument("--out", type=Path, default=Path("bench-optimize"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "LiteLLM", "dspy", "optuna", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    sliced = data_slice(args.sessions, [c for c in args.categories.split(",") if c])
    shown = Path(args.data).name if Path(args.data).is_absolute() else args.data  # no machine paths in tables
    tables = [f"# bench_optimize\n\ndata {shown} (train {args.train}, val {args.val}, test {args.test}, "
              f"sessions {args.sessions}, {args.per_split} questions per split), model {args.lm}, "
              f"budget {args.budget} LM calls"
              f"{f' or {args.time_budget:.0f} s' if args.time_budget else ''} per optimizer, attribution {args.attribution}, metric: {TOKEN_RULE}\n"]
    for system in [s for s in args.systems.split(",") if s]:
        started = time.time()
        request = CompareRequest(
            system=system, data=args.data, out=args.out / system, roles=ModelRoles(task=ModelSpec(args.lm)),
            data_slice=sliced, train=args.train, val=args.val, test=args.test, per_split=args.per_split,
            optimizers=parse_optimizers(args.optimizers), budget=args.budget, time_budget=args.time_budget,
            attribution=args.attribution,
            loop=LoopSettings.of(rounds=args.rounds, candidates=args.candidates, minibatch=args.minibatch,
                                 patience=args.patience, seed=args.seed, local_check=not args.no_local_check,
                                 demos=args.demos, demo_pool=args.demo_pool, demo_budget=args.demo_budget,
                                 compact_demos=not args.full_demos, pattern_rules=not args.no_pattern_rules,
                                 validate_ties=args.validate_ties,
                                 min_val_gain=args.min_val_gain, min_val_questions=args.min_val_questions),
            seed=args.seed, resume=args.resume,
        )
        summary = compare_optimizers(request, on_row=lambda row: print(row.to_dict(), flush=True))
        tables.append(summary.markdown(f"{system} ({time.time() - started:.0f} s)"))
        (args.out / "bench.md").write_text("\n".join(tables), encoding="utf-8")
        print(tables[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(with_progress(main))
