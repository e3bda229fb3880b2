"""`memtrace doctor`: can this machine serve the task model and the embedder, and how fast? One row per check.

The speed check measures the task model's prompt-reading and decoding rates (a prompt of a few hundred tokens
uncached, then a short decode) and stores them for the time estimates of `run`, `optimize` and `compare`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from memtrace_opt.cli import app
from memtrace_opt.cli.options import ConfigOption, LmApiBaseOption, LmOption, roles_from_cli
from memtrace_opt.errors import ConfigError, MemtraceError, ModelUnavailable
from memtrace_opt.estimate import RateStore
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.lm.weights import PartFinder, find_installed_part

QUESTION = "What is the capital of France?"
_FIX_MARKERS = ("; install it with: ", "; install them with: ", "; reinstall them with: ",
                "; reinstall the parts with: ")


@dataclass(frozen=True)
class Check:
    """One doctor check. `status` is OK, MISSING (something to install: see `fix`) or FAILED."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "OK"


@dataclass(frozen=True)
class DoctorReport:
    """The checks in order and what was measured: assemble_s, load_s, first_call_s, tokens_per_s, and the rates
    prompt_tps, decode_tps (tokens per second) and tokens_per_word."""

    model: str
    checks: tuple[Check, ...]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def table(self) -> Table:
        table = Table(title=f"memtrace doctor (task model: {self.model})")
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for c in self.checks:
            style = "green" if c.ok else "red"
            table.add_row(c.name, f"[{style}]{c.status}[/{style}]", c.detail, c.fix)
        return table


def split_fix(message: str) -> tuple[str, str]:
    """Split "<problem>; install it with: <command>" into (problem, command)."""
    for marker in _FIX_MARKERS:
        if marker in message:
            problem, _, fix = message.partition(marker)
            return problem, fix
    return message, ""


def attempt(name: str, fn: Callable[[], str]) -> Check:
    """Run one check; a ModelUnavailable with a fix is MISSING, any other error FAILED."""
    try:
        return Check(name, "OK", fn())
    except ModelUnavailable as exc:
        problem, fix = split_fix(str(exc))
        return Check(name, "MISSING" if fix else "FAILED", problem, fix)
    except Exception as exc:  # doctor reports every failure instead of raising
        return Check(name, "FAILED", f"{type(exc).__name__}: {exc}")


def _join_with_progress(engine: Any, console: Console) -> Any:
    parts = engine.choice.parts
    console.print(f"assembling {parts.filename} from {parts.count} installed parts (done once)...")
    columns = (TextColumn("join + sha256"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("join", total=parts.size)
        return engine.prepare(progress=lambda done, total: bar.update(task, completed=done, total=total))


def _embedded_checks(spec: ModelSpec, console: Console, finder: PartFinder, timings: dict[str, float]) -> list[Check]:
    from memtrace_opt.lm.embedded import LLAMA_INSTALL, EmbeddedEngine, EngineLevers, require_llama_cpp
    from memtrace_opt.lm.weights import is_verified, parts_status, target_path

    checks = [attempt("llama_cpp importable", lambda: f"llama-cpp-python {require_llama_cpp().__version__}")]
    if not checks[0].ok:
        checks[0] = dataclasses.replace(checks[0], status="MISSING", fix=LLAMA_INSTALL)
    try:
        levers = EngineLevers.from_mapping(dict(spec.extra))
    except ValueError as exc:
        raise ConfigError(f"models.task.extra.{exc}") from None
    engine = EmbeddedEngine(spec.model, finder=finder, n_ctx=int(spec.extra.get("n_ctx", 8192)), levers=levers)
    parts = engine.choice.parts
    if parts is not None:

        def parts_installed() -> str:
            parts_status(parts, finder).require()
            return f"{parts.count}/{parts.count} of {parts.dist_prefix}N=={parts.version}"

        checks.append(attempt("model parts installed", parts_installed))
    if not all(c.ok for c in checks):
        return checks

    def model_file() -> str:
        started = time.perf_counter()
        if parts is not None and not is_verified(target_path(parts), parts):
            path = _join_with_progress(engine, console)
        else:
            path = engine.prepare()
        timings["assemble_s"] = round(time.perf_counter() - started, 2)
        how = "sha256 verified" if parts is not None else "used in place"
        return f"{path} ({path.stat().st_size / 2**20:,.0f} MiB, {how}, {timings['assemble_s']:.1f}s)"

    def load() -> str:
        started = time.perf_counter()
        loaded = engine.loaded()
        timings["load_s"] = round(time.perf_counter() - started, 2)
        return f"loaded in {timings['load_s']:.1f}s (n_ctx={loaded.n_ctx})"

    def engine_levers() -> str:
        return ", ".join(f"{name} {value}" for name, value in levers.describe().items())

    for name, fn in (("model file", model_file), ("model loads", load), ("engine levers", engine_levers)):
        checks.append(attempt(name, fn))
        if not checks[-1].ok:
            break
    return checks


def _generation_check(spec: ModelSpec, timings: dict[str, float], fake_engine: Any) -> Check:
    def generate() -> str:
        import dspy

        from memtrace_opt.lm.models import Models

        uncached = dataclasses.replace(spec, max_tokens=min(spec.max_tokens, 64), extra={**spec.extra, "cache": False})
        models = Models.from_roles(ModelRoles(task=uncached), fake_engine=fake_engine)
        lm = models.task
        started = time.perf_counter()
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            answer = str(dspy.Predict("question -> answer")(question=QUESTION).answer).strip()
        seconds = time.perf_counter() - started
        usage = models.usage.snapshot()["task"]
        rate = usage.completion_tokens / seconds if seconds else 0.0
        timings.update(first_call_s=round(seconds, 2), tokens_per_s=round(rate, 1))
        if not answer:
            raise ValueError("the model returned an empty answer")
        return (f"{QUESTION!r} -> {answer[:60]!r} in {seconds:.1f}s; "
                f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens, {rate:.1f} tokens/s")

    return attempt("generation (dspy.Predict)", generate)


LEVERS = ("reading: n_batch, n_threads_batch, flash_attn; decoding: n_threads; a prefix cache (prefix_cache_mb) "
          "reads a prompt's shared prefix once (docs/engine.md)")


def _speed_check(spec: ModelSpec, timings: dict[str, float], fake_engine: Any, store: RateStore | None) -> Check:
    def measure() -> str:
        from memtrace_opt.estimate import measure_rates, model_key
        from memtrace_opt.lm.roles import build_lm
        from memtrace_opt.lm.usage import UsageTracker

        off = {"prefix_cache_mb": 0} if spec.kind == "embedded" else {}  # the embedded engine's kept prefixes
        plain = dataclasses.replace(spec, extra={**spec.extra, "cache": False, **off})
        rates = measure_rates(build_lm(plain, "rates", usage=UsageTracker(), fake_engine=fake_engine),
                              model=model_key(spec))
        timings.update(prompt_tps=round(rates.prompt_tps, 1), decode_tps=round(rates.decode_tps, 1),
                       tokens_per_word=round(rates.tokens_per_word, 3))
        where = "not stored (a fake model)" if spec.kind == "fake" or store is None else f"stored in {store.put(rates)}"
        levers = f"; levers: {LEVERS}" if spec.kind == "embedded" else ""
        return f"{rates.describe()} ({rates.tokens_per_word:.2f} tokens a word); {where} for time estimates{levers}"

    return attempt("speed (prompt reading, decoding)", measure)


def _embedder_check() -> Check:
    def embed() -> str:
        from memtrace_opt.embed import get_embedder

        vectors = get_embedder("minilm").embed(["hello"])
        return f"minilm: embed(['hello']) -> shape {tuple(vectors.shape)}"

    return attempt("embedder (minilm)", embed)


def run_doctor(
    roles: ModelRoles,
    console: Console | None = None,
    *,
    finder: PartFinder = find_installed_part,
    fake_engine: Any = None,
    check_embedder: bool = True,
    rates: RateStore | None = None,
    check_speed: bool = True,
) -> DoctorReport:
    """Check the task role's model end to end, then the embedder. Never raises for a failed check.

    Embedded models: llama_cpp, the parts, the joined and verified file, loading, one generation.
    Other models (LiteLLM strings, fake): one generation; errors become FAILED rows. Then (`check_speed`) the
    model's reading and decoding rates, stored in `rates` (default: the user's rates.json; a fake model's never).
    """
    console = console or Console()
    spec = roles.spec("task")
    timings: dict[str, float] = {}
    checks: list[Check] = []
    if spec.kind == "embedded":
        try:
            checks = _embedded_checks(spec, console, finder, timings)
        except MemtraceError as exc:  # e.g. an unknown embedded:<name>
            checks = [Check("embedded model", "FAILED", str(exc))]
    if all(c.ok for c in checks):
        checks.append(_generation_check(spec, timings, fake_engine))
        if check_speed and checks[-1].ok:
            checks.append(_speed_check(spec, timings, fake_engine, rates or RateStore()))
    if check_embedder:
        checks.append(_embedder_check())
    return DoctorReport(spec.model, tuple(checks), timings)


@app.command()
def doctor(config: ConfigOption = None, lm: LmOption = None, lm_api_base: LmApiBaseOption = None) -> None:
    """Check that the task model (default: the embedded llama.cpp model) and the embedder work."""
    console = Console()
    report = run_doctor(roles_from_cli(config, lm=lm, lm_api_base=lm_api_base), console)
    console.print(report.table())
    raise typer.Exit(0 if report.ok else 1)
