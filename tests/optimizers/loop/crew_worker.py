"""One worker of an optimization, as the crew tests (and `benchmarks/bench_workers.py`) start it in a process of
its own: Mem0 with the planted bad extraction instruction (`optfixtures.py`) and the fake LM (each call taking
`--latency` seconds) on the toy conversation (four copies: toy-d to train on, toy-a and toy-b to validate on, so
that the workers split validations by conversation, toy-c to test on), three rounds.

    python crew_worker.py DATA OUT [--storage URL] [--ready DIR --peers N] [--latency S] [--heartbeat S]

With `--ready`, the worker marks itself ready in DIR and waits until N workers have, so that every worker
is up before the first one claims work.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optfixtures import BAD_EXTRACT, EXTRACT, make_models  # noqa: E402

from memtrace_opt.optimizers import LoopSettings, with_instruction  # noqa: E402
from memtrace_opt.optimizers.core.program_io import save_program  # noqa: E402
from memtrace_opt.optimizers.optimize import OptimizeRequest, optimize_system  # noqa: E402
from memtrace_opt.programs.mem0 import Mem0Memory  # noqa: E402

SETTINGS = LoopSettings.of(rounds=3, patience=3, candidates=3, minibatch=5)


def slowed(engine: Any, seconds: float) -> None:
    """Every call of the fake engine takes `seconds` longer: a stand-in for a model served elsewhere."""
    complete = engine.complete

    def slow(request: Any) -> Any:
        time.sleep(seconds)
        return complete(request)

    engine.complete = slow


def wait_for_peers(ready: Path, peers: int, timeout: float = 120.0) -> None:
    ready.mkdir(parents=True, exist_ok=True)
    (ready / str(os.getpid())).touch()
    deadline = time.monotonic() + timeout
    while len(list(ready.iterdir())) < peers:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(list(ready.iterdir()))} of {peers} workers came up")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out", type=Path)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--ready", type=Path, default=None)
    parser.add_argument("--peers", type=int, default=1)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--heartbeat", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {os.getpid()} %(name)s: %(message)s")
    models, engine = make_models()
    if args.latency > 0:
        slowed(engine, args.latency)
    if args.ready is not None:
        wait_for_peers(args.ready, args.peers)
    planted = args.out.parent / f"planted-{os.getpid()}.json"
    save_program(with_instruction(Mem0Memory(), EXTRACT, BAD_EXTRACT), planted)
    request = OptimizeRequest(system="mem0", data=args.data, out=args.out, train="toy-d", val="toy-a,toy-b", test="toy-c",
                              settings=SETTINGS, attribution="lineage", storage=args.storage, program_path=planted)
    summary = optimize_system(request, models=models, optimizer_options={"heartbeat": args.heartbeat})
    print(f"done {summary.rounds} rounds, valset {summary.baseline_val:.3f} -> {summary.best_val:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
