"""Workers sharing one optimization: the wall time of a fixed optimization, one worker vs several.

    python benchmarks/bench_workers.py --latency 0.5       # 1 vs 2 workers on the packaged sample, three rounds
    python benchmarks/bench_workers.py --latency 0.5 --data ../shared/data/locomo/locomo10.json --sessions 1-1
        --train conv-26 --val conv-41,conv-43,conv-49,conv-50 --test conv-30   # (one line) validations split 4 ways
    python benchmarks/bench_workers.py --workers 1,2,3 --optimize-arg=--no-local-check

The model is the fake LM behind an OpenAI-compatible server on loopback that sleeps `--latency` seconds in each
request: a stand-in for a model served elsewhere, so that the workers' LM calls overlap as they would against
a real server. The optimization is `memtrace optimize` (by default on the packaged sample conversation): Mem0
starting from an extraction instruction that says nothing of dates (the fake extractor then drops every dated fact, so the
blame falls on the write path, whose candidates replay the conversation), three rounds, patience three, DSPy's
response cache off. One worker runs alone on its own study; N workers share a SQLite study (`--storage`), each
with its own run directory. Wall time is from the first worker's start to the last one's exit (each also runs
the test split); the optimization's own seconds (the manifest's) are printed beside it. Every run must end with the same program.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memtrace_opt.optimizers import with_instruction  # noqa: E402
from memtrace_opt.optimizers.core.program_io import save_program  # noqa: E402
from memtrace_opt.programs.mem0 import Mem0Memory  # noqa: E402
from memtrace_opt.testing.openai_server import FakeOpenAIServer  # noqa: E402

UNDATED = ("You keep the long-term memory of a conversation. Write down the facts worth remembering about the "
           "speakers, one short sentence each, naming the person.")


def config(path: Path, api_base: str, rounds: int) -> Path:
    """The run's config: every role on the server, DSPy's cache off (a cached reply would cost no latency)."""
    spec = {"model": "openai/fake", "api_base": api_base, "extra": {"cache": False}}
    path.write_text(json.dumps({
        "system": "mem0", "data": "sample",
        "models": {"task": spec, "reflection": spec, "attributor": spec},
        "optimize": {"rounds": rounds, "patience": rounds},
    }), encoding="utf-8")
    return path


def run(out: Path, workers: int, api_base: str, rounds: int, extra: list[str]) -> dict[str, Any]:
    """`workers` processes of one optimization; their wall time, LM calls and programs."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = config(out / "config.json", api_base, rounds)
    start = save_program(with_instruction(Mem0Memory(), "extract_facts.predict", UNDATED), out / "start.json")
    storage = [f"--storage=sqlite:///{(out / 'shared.db').resolve()}"] if workers > 1 else []
    env = {**os.environ, "OPENAI_API_KEY": "unused"}
    started = time.perf_counter()
    processes = []
    for i in range(workers):
        argv = ["memtrace", "optimize", "--config", str(cfg), "--program", str(start), "--out", str(out / f"w{i + 1}"),
                *storage, *extra]
        log = (out / f"w{i + 1}.log").open("w")
        processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env))
    codes = [p.wait() for p in processes]
    seconds = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"{out}: a worker failed ({codes}); see its log there")
    manifests = [json.loads((out / f"w{i + 1}" / "manifest.json").read_text()) for i in range(workers)]
    programs = {(out / f"w{i + 1}" / "program.json").read_text() for i in range(workers)}
    return {
        "workers": workers,
        "seconds": round(seconds, 1),
        "optimization_seconds": round(max(float(m["optimizer"]["seconds"]) for m in manifests), 1),
        "lm_calls": sum(sum(role.get("calls", 0) for role in m["usage"].values()) for m in manifests),
        "rounds": len(manifests[0]["rounds"]),
        "val": [manifests[0]["baseline"]["val_accuracy"], manifests[0]["optimizer"]["best_val_accuracy"]],
        "program": programs.pop() if len(programs) == 1 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the server sleeps in each request")
    parser.add_argument("--workers", default="1,2", help="worker counts to time (comma list)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("runs") / "bench-workers")
    for flag in ("--data", "--sessions", "--train", "--val", "--test", "--threads"):
        parser.add_argument(flag, help=f"`memtrace optimize {flag}` (default: its own)")
    parser.add_argument("--optimize-arg", action="append", default=[], metavar="ARG",
                        help="another argument for `memtrace optimize`, e.g. --optimize-arg=--no-local-check")
    args = parser.parse_args(argv)
    extra = [f"--{name}={value}" for name in ("data", "sessions", "train", "val", "test", "threads")
             if (value := getattr(args, name)) is not None] + args.optimize_arg
    counts = [int(n) for n in args.workers.split(",")]
    results = []
    with FakeOpenAIServer(latency=args.latency) as server:
        for workers in counts:
            result = run(args.out / f"{workers}-workers-{time.strftime('%H%M%S')}", workers, server.api_base,
                         args.rounds, extra)
            print(f"{workers} worker(s): {result['seconds']:.1f} s ({result['optimization_seconds']:.1f} s optimizing), "
                  f"{result['lm_calls']} LM calls "
                  f"(all workers, test splits included), {result['rounds']} rounds, "
                  f"valset {result['val'][0]:.3f} -> {result['val'][1]:.3f}", flush=True)
            results.append(result)
    first = results[0]
    for result in results[1:]:
        same = result["program"] is not None and result["program"] == first["program"]
        print(f"{result['workers']} workers vs {first['workers']}: {first['seconds'] / result['seconds']:.2f}x faster "
              f"(the optimization alone {first['optimization_seconds'] / result['optimization_seconds']:.2f}x); "
              f"same program.json: {'yes' if same else 'NO'}")
    (args.out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
