"""The data and split arguments the scripts that score programs on LoCoMo splits share, and the splits they give."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memtrace_opt.errors import MemtraceError

if TYPE_CHECKING:
    import dspy

    from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
    from memtrace_opt.optimizers.evaluation.examples import CaseRef
    from memtrace_opt.optimizers.evaluation.splits import Splits

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"


def add_split_arguments(parser: argparse.ArgumentParser, *, test: bool = True) -> None:
    """--data, --train, --val (and --test), --sessions, --categories, --per-split, --seed, --lm."""
    parser.add_argument("--data", default=str(DATA), help="a LoCoMo-format file (default: ../shared/data)")
    parser.add_argument("--train", default="conv-26", help="conversations to optimize on (all three lists empty: "
                        "the conversations split by 0.4,0.3,0.3, a single one by its questions)")
    parser.add_argument("--val", default="conv-30", help="conversations to validate on (empty: drawn from the others)")
    if test:
        parser.add_argument("--test", default="conv-41,conv-42",
                            help="conversations held out (a conversation belongs to one split only)")
    parser.add_argument("--sessions", default="1-3", help="sessions kept of every conversation")
    parser.add_argument("--categories", default="single-hop,multi-hop,temporal,open-domain")
    parser.add_argument("--per-split", type=int, default=20, help="questions per split (seeded sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lm", default="embedded")


Main = Callable[[list[str] | None], int]


def usage_errors(main: Main) -> Main:
    """A script's `main(argv)` that reports an error a user can act on (a conversation named by two splits, a data
    file that is not there: a `MemtraceError`) as the `memtrace` commands do: one line on stderr, `error: ...`, and
    its exit code (2, a usage error) instead of a traceback."""

    @functools.wraps(main)
    def checked(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except MemtraceError as exc:
            sys.stderr.write(f"{'interrupted' if exc.exit_code == 130 else 'error'}: {exc}\n")
            return exc.exit_code

    return checked


def load_splits(args: argparse.Namespace) -> Splits:
    """The `Splits` the arguments name (a ConfigError for a conversation named by two of them)."""
    from memtrace_opt.cli.common import data_slice
    from memtrace_opt.data import load_data
    from memtrace_opt.optimizers.evaluation.splits import make_splits

    dataset = load_data(args.data, data_slice(args.sessions, [c for c in args.categories.split(",") if c]))
    return make_splits(dataset, train=args.train, val=args.val, test=getattr(args, "test", None),
                       per_split=args.per_split, seed=args.seed)


def split_cases(splits: Splits) -> dict[str, list[CaseRef]]:
    """The questions of each split, by name: train, val, and test where the splits have one."""
    from memtrace_opt.optimizers.evaluation.examples import case_refs, make_examples

    named = {"train": splits.train, "val": splits.val, "test": splits.test}
    return {name: case_refs(make_examples(part)) for name, part in named.items() if name != "test" or part}


def task_evaluator(args: argparse.Namespace) -> CachedEvaluator:
    """An evaluator scoring `args.system` with the token rule on the task model `args.lm`."""
    from memtrace_opt import progress
    from memtrace_opt.lm.models import Models
    from memtrace_opt.lm.roles import ModelRoles, ModelSpec
    from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
    from memtrace_opt.optimizers.evaluation.metric import AnswerMetric

    models = Models.from_roles(ModelRoles(task=ModelSpec(args.lm)))
    progress.watch(models.usage)  # the LM calls and tokens/s of the script's progress display
    return CachedEvaluator(AnswerMetric(), task_lm=models.task, meta={"system": args.system})


def answer_predictor(program: dspy.Module) -> str | None:
    """The name of the predictor of `program` that writes the answers (the first named answer...)."""
    from memtrace_opt.optimizers.core.program_io import instructions_of

    return next((name for name in instructions_of(program) if name.startswith("answer")), None)
