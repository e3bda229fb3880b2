"""`memtrace optimize` and `memtrace compare`: the closed-loop optimizer, and it against DSPy's optimizers."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar, get_args, get_type_hints

import typer

from memtrace_opt import progress
from memtrace_opt.cli import app
from memtrace_opt.cli.common import console, data_slice, with_model_flags
from memtrace_opt.cli.options import GoldOption
from memtrace_opt.config import load_config
from memtrace_opt.config_schema import key_bounds, validate_program_settings
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.programs import SYSTEMS

SYSTEM_HELP = f"Memory system: {', '.join(SYSTEMS)}, or an import path package.module:Class."
IDS_HELP = "Comma-separated conversation ids"
QUIET_HELP = "No progress display and no time estimate on stderr (the results still go to stdout)."

F = TypeVar("F", bound=Callable[..., Any])


def with_loop_flags(*, exclude: Collection[str] = ()) -> Callable[[F], F]:
    """Adds one flag per knob of the loop's settings tree (`LoopSettings`, generated from its fields: their
    names, help texts and flag declarations) to a command whose function takes `loop`: the knobs given on the
    command line, by name (a flag left out is not in it). `exclude` names knobs the command declares itself."""

    def decorate(func: F) -> F:
        from memtrace_opt.optimizers.core.knobs import knobs
        from memtrace_opt.optimizers.loop.settings import LoopSettings

        flags = [k for k in knobs(LoopSettings) if k.name not in exclude]
        hints = get_type_hints(func, include_extras=True)
        signature = inspect.signature(func)
        own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
               if p.name != "loop"]
        added = [inspect.Parameter(k.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=_flag_annotation(k, get_type_hints(k.owner)[k.name])) for k in flags]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {k.name: kwargs.pop(k.name, None) for k in flags}
            return func(*args, loop={name: value for name, value in given.items() if value is not None}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*own, *added]}
        del wrapper.__wrapped__  # typer must read the new signature, not the original's
        return wrapper  # type: ignore[return-value]

    return decorate


def _flag_annotation(knob: Any, hint: Any) -> Any:
    """`Annotated[Optional[T], typer.Option(...)]` for a knob whose field is typed `hint` (T or T | None): None
    is "not given", so the config file's key, else the settings' default, applies. A number is bounded as the
    config file's `optimize:` key of its name."""
    base = next((t for t in get_args(hint) if t is not type(None)), hint)
    return Annotated[Optional[base], typer.Option(knob.flag, help=knob.help, **_bounded(f"optimize.{knob.name}"))]  # noqa: UP045


def _bounded(key: str) -> dict[str, Any]:
    """typer.Option's arguments refusing a value outside the bounds the config schema puts on `key` (one line,
    exit 2): its least and greatest values, and a callback for an open bound (`time_budget` > 0)."""
    bounds = key_bounds(key)
    if not (bounds.low_open or bounds.high_open):
        return {"min": bounds.low, "max": bounds.high}

    def check(value: float | None) -> float | None:
        refusal = None if value is None else bounds.refusal(value)
        if refusal is not None:
            raise typer.BadParameter(refusal)
        return value

    return {"min": bounds.low, "max": bounds.high, "callback": check}


def _loop_values(opt_cfg: dict[str, Any], loop: dict[str, Any], exclude: Collection[str] = ()) -> dict[str, Any]:
    """The loop's knobs: those given as flags (`loop`), else the config's `optimize:` keys of the same names
    (but the `exclude`d, which the command declares itself); a knob set by neither is left out, so the settings
    keep its default."""
    from memtrace_opt.optimizers.core.knobs import knobs
    from memtrace_opt.optimizers.loop.settings import LoopSettings

    names = [k.name for k in knobs(LoopSettings) if k.name not in exclude]
    return {**{name: opt_cfg[name] for name in names if opt_cfg.get(name) is not None}, **loop}


COMPARE_OWN = ("budget", "time_budget")  # `compare` has its own: each optimizer's budget


def _out(kind: str, system: str) -> Path:
    return Path("runs") / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{kind}-{system.replace(':', '_').replace('.', '_')}"


@app.command("optimize")
@with_model_flags
@with_loop_flags()
def optimize_command(
    system: Annotated[Optional[str], typer.Option("--system", "-s", help=SYSTEM_HELP)] = None,  # noqa: UP045
    data: Annotated[Optional[str], typer.Option("--data", "-d", help="PATH[:SAMPLE_ID], or locomo / longmemeval / sample.")] = None,  # noqa: UP045
    train: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} to optimize on.")] = None,  # noqa: UP045
    val: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} to accept changes on (default: drawn from the conversations outside --train and --test).")] = None,  # noqa: UP045
    test: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} held out for the final test (a conversation belongs to one split only).")] = None,  # noqa: UP045
    split: Annotated[Optional[str], typer.Option(help="Without --train: split the slice's conversations by these fractions, e.g. 0.4,0.3,0.3 (a single conversation: its questions).")] = None,  # noqa: UP045
    per_split: Annotated[Optional[int], typer.Option(help="At most N questions per split (a seeded sample).", **_bounded("per_split"))] = None,  # noqa: UP045
    sessions: Annotated[Optional[str], typer.Option(help="Keep sessions A-B (1-based, inclusive).")] = None,  # noqa: UP045
    category: Annotated[Optional[list[str]], typer.Option(help="Keep only this question category (repeatable).")] = None,  # noqa: UP045
    limit: Annotated[Optional[int], typer.Option(help="Keep the first N questions of the slice.", **_bounded("limit"))] = None,  # noqa: UP045
    gold: GoldOption = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory (an unfinished one resumes).")] = None,  # noqa: UP045
    preset: Annotated[Optional[str], typer.Option(help="quick: a small slice and a few rounds (9.5 min with the embedded model on 2 AVX2 cores; the estimate for this machine is printed first).")] = None,  # noqa: UP045
    attribution: Annotated[Optional[str], typer.Option(help="Attribution method: graphtrace, lineage, blame_response, ...")] = None,  # noqa: UP045
    judge: Annotated[Optional[bool], typer.Option("--judge/--no-judge", help="Score with the LLM judge (default: the token rule).")] = None,  # noqa: UP045
    storage: Annotated[Optional[str], typer.Option(help="Optuna storage URL (default: sqlite in --out); share one to run several workers.")] = None,  # noqa: UP045
    program: Annotated[Optional[Path], typer.Option("--program", help="Start from a compiled program.json.")] = None,  # noqa: UP045
    seed: Annotated[Optional[int], typer.Option(help="Seed for splits and minibatches (default 0).")] = None,  # noqa: UP045
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    *,
    roles: ModelRoles,
    config: Path | None,
    loop: dict[str, Any],
) -> None:
    """Optimize the prompts attribution blames, round by round, and test the result on held-out questions.

    Writes program.json (load it with `memtrace run --program DIR/program.json`), manifest.json (every round:
    blame, chosen predictor, candidates and why each was accepted or rejected), verdicts.jsonl, cases.jsonl
    and graphs/ (the test run) and optuna.db under --out. Settings may also come from --config (keys: system,
    data, train, val, test, split, per_split, seed, sessions, categories, limit, out, program, settings,
    optimize: {rounds, patience, ..., attribution, judge, storage, preset}).
    """
    from memtrace_opt.optimizers.optimize import optimize_system

    cfg = load_config(config)
    given = _Given(data, train, val, test, split, per_split, sessions, category, limit, gold, seed)
    options = _OptimizeOptions(out, preset, attribution, judge, storage, program)
    request = _optimize_request(_system(system, cfg), cfg, given, options, roles, loop)
    with progress.reporting(progress.for_stderr(quiet)):
        summary = optimize_system(request, on_round=_say_round)
    _print_closing(summary.run_dir)


@dataclass(frozen=True)
class _Given:
    """The data and split flags of `optimize` and `compare` as given (None: not given); the config's keys of the
    same names stand in for those not given (`SplitRequest` and the seed of the splits)."""

    data: str | None
    train: str | None
    val: str | None
    test: str | None
    split: str | None
    per_split: int | None
    sessions: str | None
    category: list[str] | None
    limit: int | None
    gold: str | None
    seed: int | None

    def request_fields(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        """The request's data and split fields and its seed: each flag, else the config key of its name
        (`categories` for `--category`; a split's conversations as a YAML list or a comma-separated string), else
        the default."""
        limit = self.limit if self.limit is not None else cfg.get("limit")
        return {
            "data": str(self.data or cfg.get("data") or "sample"),
            "data_slice": data_slice(self.sessions or cfg.get("sessions"), self.category or cfg.get("categories"),
                                     limit, gold=self.gold),
            "train": self.train or _ids(cfg.get("train")),
            "val": self.val or _ids(cfg.get("val")),
            "test": self.test or _ids(cfg.get("test")),
            "split": str(self.split or cfg.get("split") or "0.4,0.3,0.3"),
            "per_split": self.per_split if self.per_split is not None else cfg.get("per_split"),
            "seed": self.seed if self.seed is not None else int(cfg.get("seed") or 0),
        }


def _ids(value: Any) -> str | None:
    """A config's conversation ids as the flags give them: a YAML list joined by commas, a string as it is."""
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True)
class _OptimizeOptions:
    """`optimize`'s own flags as given (None: not given)."""

    out: Path | None
    preset: str | None
    attribution: str | None
    judge: bool | None
    storage: str | None
    program: Path | None


def _system(system: str | None, cfg: Mapping[str, Any]) -> str:
    """--system, else the config's `system:`; a usage error when neither names one."""
    chosen = system or cfg.get("system")
    if not chosen:
        raise typer.BadParameter("give --system (or `system:` in --config)", param_hint="--system")
    return str(chosen)


def _optimize_request(system: str, cfg: Mapping[str, Any], given: _Given, options: _OptimizeOptions,
                      roles: ModelRoles, loop: dict[str, Any]) -> Any:
    """The OptimizeRequest of the flags over the config file (`optimize:` keys for the loop and its options), with
    the preset's values for what neither set (loop flags given with a preset still win)."""
    from memtrace_opt.optimizers.loop.settings import LoopSettings
    from memtrace_opt.optimizers.optimize import OptimizeRequest, apply_preset

    opt_cfg = dict(cfg.get("optimize") or {})
    explicit = {k for k, v in {"data": given.data or cfg.get("data"), "split": given.split or cfg.get("split"),
                               "attribution": options.attribution or opt_cfg.get("attribution")}.items() if v}
    fields = given.request_fields(cfg)
    explicit_loop = {**_loop_values(opt_cfg, loop), "seed": fields["seed"]}
    request = OptimizeRequest(
        system=system,
        out=options.out or (Path(cfg["out"]) if cfg.get("out") else _out("optimize", system)),
        roles=roles,
        **fields,
        program_settings=validate_program_settings(system, cfg.get("settings")),
        program_path=options.program or (Path(cfg["program"]) if cfg.get("program") else None),
        settings=LoopSettings.of(**explicit_loop),
        attribution=str(options.attribution or opt_cfg.get("attribution") or "graphtrace"),
        judge=bool(options.judge if options.judge is not None else opt_cfg.get("judge", False)),
        storage=options.storage or opt_cfg.get("storage"),
        preset=options.preset or opt_cfg.get("preset"),
    )
    if request.preset:
        request = apply_preset(request, explicit)
        if explicit_loop:  # flags given with a preset still win
            request = _override_loop(request, explicit_loop)
    return request


def _say_round(record: Any) -> None:
    verdict = "accepted" if record.accepted else "no change"
    _say(f"round {record.round}: blame {record.blame_counts or '{}'}, not fixable {record.not_fixable or '{}'}; "
         f"rewrote {record.chosen_predictor or '-'}: {verdict}; valset {record.val_accuracy:.3f}; "
         f"{record.lm_calls} LM calls")


def _print_closing(run_dir: Path) -> None:
    """What the optimization did and where to look, from its manifest."""
    from memtrace_opt.optimizers.closing import closing_lines
    from memtrace_opt.rundir import RunDir

    run, out_console = RunDir(run_dir), console()
    for line in closing_lines(run.read_manifest(), run_dir, report_written=run.report_path.is_file()):
        out_console.print(line, markup=False, highlight=False, soft_wrap=True)


def _say(line: str) -> None:
    """A result line on stdout while a job runs: written to `sys.stdout` as it is then, so that a live progress
    display on the terminal (stderr) keeps the line above itself."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _override_loop(request: Any, values: dict[str, Any]) -> Any:
    from dataclasses import replace

    return replace(request, settings=request.settings.with_values(values))


@app.command("compare")
@with_model_flags
@with_loop_flags(exclude=COMPARE_OWN)
def compare_command(
    system: Annotated[Optional[str], typer.Option("--system", "-s", help=SYSTEM_HELP)] = None,  # noqa: UP045
    data: Annotated[Optional[str], typer.Option("--data", "-d", help="PATH[:SAMPLE_ID], or locomo / longmemeval / sample.")] = None,  # noqa: UP045
    optimizers: Annotated[str, typer.Option(help="Comma-separated: memtrace, gepa, mipro, copro, simba, bootstrap, blame_response, gepa_attributed, memtrace_roundrobin, memtrace_all, memtrace_norepair, memtrace_nopatterns, memtrace_nolocal, memtrace_promptonly, optuna_blind.")] = "memtrace,gepa,mipro,copro,simba,bootstrap,blame_response",
    budget: Annotated[int, typer.Option(help="LM calls each optimizer may spend (task + reflection [+ attributor]).", **_bounded("optimize.budget"))] = 200,
    time_budget: Annotated[Optional[float], typer.Option(help="And at most this many seconds each (wall time).", **_bounded("optimize.time_budget"))] = None,  # noqa: UP045
    train: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} to optimize on.")] = None,  # noqa: UP045
    val: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} for validation (default: drawn from the conversations outside --train and --test).")] = None,  # noqa: UP045
    test: Annotated[Optional[str], typer.Option(help=f"{IDS_HELP} held out for testing (a conversation belongs to one split only).")] = None,  # noqa: UP045
    split: Annotated[Optional[str], typer.Option(help="Without --train: conversation fractions, e.g. 0.4,0.3,0.3 (a single conversation: its questions).")] = None,  # noqa: UP045
    per_split: Annotated[Optional[int], typer.Option(help="At most N questions per split.", **_bounded("per_split"))] = None,  # noqa: UP045
    sessions: Annotated[Optional[str], typer.Option(help="Keep sessions A-B (1-based, inclusive).")] = None,  # noqa: UP045
    category: Annotated[Optional[list[str]], typer.Option(help="Keep only this question category (repeatable).")] = None,  # noqa: UP045
    limit: Annotated[Optional[int], typer.Option(help="Keep the first N questions of the slice.", **_bounded("limit"))] = None,  # noqa: UP045
    gold: GoldOption = None,
    attribution: Annotated[Optional[str], typer.Option(help="Attribution method of `memtrace` (default: graphtrace).")] = None,  # noqa: UP045
    judge: Annotated[Optional[bool], typer.Option("--judge/--no-judge", help="Score with the LLM judge (default: the token rule).")] = None,  # noqa: UP045
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output directory.")] = None,  # noqa: UP045
    seed: Annotated[Optional[int], typer.Option(help="Seed for splits and minibatches (default 0).")] = None,  # noqa: UP045
    resume: Annotated[bool, typer.Option("--resume", help="Keep the rows of --out's compare.json written by this same comparison; run only the optimizers with none.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
    *,
    roles: ModelRoles,
    config: Path | None,
    loop: dict[str, Any],
) -> None:
    """Compare our optimizer with DSPy's (GEPA, MIPROv2, COPRO, SIMBA, BootstrapFewShot) at one LM-call budget.

    Writes compare.md and compare.json (held-out accuracy before/after, the questions each optimizer fixed and
    broke with a paired 95% interval and sign test, LM calls, tokens, wall time per optimizer), compare.png
    (accuracy against LM calls) and programs/<optimizer>.json (each optimized program) under --out. The loop's
    flags (--rounds, --patience, --demos, --min-val-gain, ...) set our loop (`memtrace`, `blame_response` and the ablations `memtrace_roundrobin`, `memtrace_all`, `memtrace_norepair`, `memtrace_nopatterns`, `memtrace_nolocal`, `memtrace_promptonly`).
    """
    from memtrace_opt.lm.roles import check_roles
    from memtrace_opt.optimizers.comparison.compare import compare_optimizers

    cfg = load_config(config)
    given = _Given(data, train, val, test, split, per_split, sessions, category, limit, gold, seed)
    request = _compare_request(_system(system, cfg), cfg, given, _CompareOptions(optimizers, budget, time_budget,
                               attribution, judge, out, resume), roles, loop)
    check_roles(roles, ("task", "reflection", "attributor", *(("judge",) if request.judge else ())))  # a call each
    with progress.reporting(progress.for_stderr(quiet)):
        summary = compare_optimizers(request, on_row=_say_row)
    out_console = console()
    out_console.print(summary.markdown())
    out_console.print(f"-> {summary.out / 'compare.md'}, compare.json, compare.png, programs/")


@dataclass(frozen=True)
class _CompareOptions:
    """`compare`'s own flags."""

    optimizers: str
    budget: int
    time_budget: float | None
    attribution: str | None
    judge: bool | None
    out: Path | None
    resume: bool


def _compare_request(system: str, cfg: Mapping[str, Any], given: _Given, options: _CompareOptions,
                     roles: ModelRoles, loop: dict[str, Any]) -> Any:
    """The CompareRequest of the flags over the config file: its data, slice and split keys and seed as optimize
    reads them, `out`, `settings`, and from `optimize:` the loop's knobs, `attribution` and `judge` (each
    optimizer's budget is compare's own)."""
    from memtrace_opt.optimizers.comparison.compare import CompareRequest, parse_optimizers
    from memtrace_opt.optimizers.loop.settings import LoopSettings

    opt_cfg = dict(cfg.get("optimize") or {})
    fields = given.request_fields(cfg)
    return CompareRequest(
        system=system,
        out=options.out or (Path(cfg["out"]) if cfg.get("out") else _out("compare", system)),
        roles=roles,
        **fields,
        optimizers=parse_optimizers(options.optimizers), budget=options.budget, time_budget=options.time_budget,
        attribution=str(options.attribution or opt_cfg.get("attribution") or "graphtrace"),
        judge=bool(options.judge if options.judge is not None else opt_cfg.get("judge", False)),
        program_settings=validate_program_settings(system, cfg.get("settings")),
        loop=LoopSettings.of(**_loop_values(opt_cfg, loop, COMPARE_OWN), seed=fields["seed"]),
        resume=options.resume,
    )


def _say_row(row: Any) -> None:
    after = "error" if row.optimized_accuracy is None else f"{row.optimized_accuracy:.3f}"
    moved = ""
    if row.paired is not None:
        fixed_broken, interval = row.paired.cells()
        moved = f" (questions {fixed_broken}, 95% CI {interval})"
    if row.answers is not None:
        moved += f", mean F1 {row.answers.cells()[0]}"
    _say(f"{row.optimizer}: {row.baseline_accuracy:.3f} -> {after}{moved}, {row.lm_calls} LM calls, "
         f"{row.seconds:.0f} s" + (f" ({row.error})" if row.error else ""))
