"""Run all four memory systems on one fixed LoCoMo slice and print a comparison table.

    python benchmarks/run_systems.py                      # embedded model, conv-26 sessions 1-3
    python benchmarks/run_systems.py --lm fake --data sample --systems rag,mem0
    python benchmarks/run_systems.py --lm openai/gpt-4.1-mini --limit 50
    python benchmarks/run_systems.py --data longmemeval --sessions "" --samples 66f24dbb,9aaed6a3,8077ef71

Per system: questions, token F1, judge accuracy (J), rule accuracy, LM calls (task role) and seconds per
question, write-path LM calls. Each system runs in its own run directory under --out, so the graphs and cases
can be inspected (`memtrace report DIR`). The table is printed as markdown too, to paste into notes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memtrace_opt import progress  # noqa: E402
from memtrace_opt.benchmarks.progress_display import with_progress  # noqa: E402
from memtrace_opt.data import DataSlice, parse_sessions  # noqa: E402
from memtrace_opt.lm.models import Models  # noqa: E402
from memtrace_opt.lm.roles import ModelRoles, ModelSpec  # noqa: E402
from memtrace_opt.metrics import TOKEN_RULE  # noqa: E402
from memtrace_opt.runner import RunRequest, run_system  # noqa: E402

SYSTEMS = ("long_context", "rag", "mem0", "evermemos")  # and mem0ai, by --systems, where its extra is installed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="locomo:conv-26")
    parser.add_argument("--sessions", default="1-3")
    parser.add_argument("--samples", default=None, help="comma-separated conversation (LongMemEval question) ids")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--categories", default=None, help="comma-separated question categories to keep (e.g. 1,2,3,4)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--lm", default="embedded")
    parser.add_argument("--no-judge", action="store_true")
    parser.add_argument("--no-cache", action="store_true", help="every LM call live (DSPy's cache off), for timings")
    parser.add_argument("--n-ctx", type=int, default=None,
                        help="the embedded engine's context (mem0ai: Mem0 2.x's extraction prompt alone is about 8k tokens)")
    parser.add_argument("--out", type=Path, default=Path("runs") / f"bench-systems-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args(argv)

    extra: dict[str, object] = {"cache": False} if args.no_cache else {}
    if args.n_ctx:
        extra["n_ctx"] = args.n_ctx
    roles = ModelRoles(task=ModelSpec(model=args.lm, extra=extra))
    samples = tuple(s for s in args.samples.split(",") if s) if args.samples else None
    categories = tuple(c for c in args.categories.split(",") if c) if args.categories else None
    data_slice = DataSlice(sample_ids=samples, sessions=parse_sessions(args.sessions) if args.sessions else None,
                           categories=categories, limit=args.limit)
    rows = []
    for system in args.systems.split(","):
        models = Models.from_roles(roles)
        request = RunRequest(system=system, data=args.data, out=args.out / system, roles=roles,
                             data_slice=data_slice, judge=not args.no_judge)
        progress.stage(system, level=1)
        summary = run_system(request, models=models)
        usage = summary.usage.get("task", {})
        overall = summary.table.overall
        n = max(summary.questions, 1)
        rows.append({
            "system": system,
            "questions": summary.questions,
            "f1": round(100 * overall.mean_f1, 1),
            "judge": None if overall.judge_accuracy is None else round(100 * overall.judge_accuracy, 1),
            "rule_acc": round(100 * overall.rule_accuracy, 1),
            "task_lm_calls": usage.get("calls", 0),
            "cache_hits": usage.get("cache_hits", 0),
            "lm_calls_per_q": round(usage.get("calls", 0) / n, 2),
            "seconds": round(summary.seconds, 1),
            "seconds_per_q": round(summary.seconds / n, 2),
            "op_failures": summary.op_failures,
        })
        print(json.dumps(rows[-1]), flush=True)

    header = ["system", "questions", "F1", "J", "rule acc", "task LM calls", "of them cached", "LM calls/q", "s total", "s/q", "op failures"]
    print(f"\n{args.data} sessions {args.sessions or 'all'}, samples {args.samples or 'all'}, task LM {args.lm}; "
          f"rule acc by {TOKEN_RULE}; seconds include cached LM calls (a rerun of the same prompts is served from DSPy's cache)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        cells = [r["system"], r["questions"], r["f1"], "-" if r["judge"] is None else r["judge"], r["rule_acc"],
                 r["task_lm_calls"], r["cache_hits"], r["lm_calls_per_q"], r["seconds"], r["seconds_per_q"], r["op_failures"]]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(with_progress(main))
