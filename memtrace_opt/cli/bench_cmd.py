"""`memtrace bench build` / `memtrace bench eval`: MemTraceBench, labelled failures and attribution scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.attribution.protocol import LM_FREE_METHODS
from memtrace_opt.cli import app
from memtrace_opt.cli.common import console, data_slice, with_model_flags
from memtrace_opt.cli.options import JudgeEvidenceOption, check_judge_evidence
from memtrace_opt.lm.roles import ModelRoles, check_roles

bench_app = typer.Typer(help="MemTraceBench: build labelled failures, score attribution methods.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")



def _models(roles: ModelRoles, models: Any = None, needed: tuple[str, ...] = ("task",)) -> Any:
    """The run's models, each role in `needed` checked first (one short call); a "fake" task model answers with
    the built-in systems' default skills."""
    from memtrace_opt.lm.models import Models

    if models is not None:
        return models
    check_roles(roles, needed)
    if roles.spec("task").kind == "fake":
        from memtrace_opt.testing import FakeEngine
        from memtrace_opt.testing.skills import default_skills

        return Models.from_roles(roles, fake_engine=FakeEngine(skills=default_skills()))
    return Models.from_roles(roles)


def bench_build_impl(
    out: Path,
    systems: list[str],
    *,
    data: str = "sample",
    roles: ModelRoles | None = None,
    kinds: list[str] | None = None,
    per_kind: int = 2,
    program_embedder: str | None = None,
    embedder: str = "minilm",
    natural: bool = True,
    gold: bool = True,
    seed: int = 0,
    data_slice: Any = None,
    progress: bool = True,
    models: Any = None,
) -> Any:
    """Build the benchmark into `out` and print its counts. Returns the BuildSummary."""
    from rich.table import Table

    from memtrace_opt.benchmarks.memtracebench.build import BuildRequest, build_bench
    from memtrace_opt.benchmarks.memtracebench.inject import INJECTABLE

    unknown = sorted(set(kinds or ()) - set(INJECTABLE))
    if unknown:
        raise typer.BadParameter(f"unknown error type(s) {', '.join(unknown)}; choose from {', '.join(INJECTABLE)}")
    settings = {s: {"embedder": program_embedder} for s in systems} if program_embedder else {}
    request = BuildRequest(systems=tuple(systems), out=out, data=data, settings=settings,
                           kinds=tuple(kinds) if kinds else INJECTABLE, per_kind=per_kind, natural=natural,
                           gold=gold, seed=seed, embedder=embedder, data_slice=data_slice)
    out_console = console()
    task_lm = _models(roles or ModelRoles(), models).task
    summary = build_bench(request, task_lm=task_lm,
                          progress=(lambda message: out_console.log(message)) if progress else None)
    table = Table(title=f"MemTraceBench: {summary.cases} cases -> {summary.out}")
    for column in ("system", "source / error type", "cases"):
        table.add_column(column, justify="right" if column == "cases" else "left")
    for system, counts in summary.counts.items():
        for key, count in counts.items():
            table.add_row(system, key, str(count))
    out_console.print(table)
    return summary


def bench_eval_impl(
    bench: Path,
    methods: list[str],
    *,
    roles: ModelRoles | None = None,
    embedder: str = "minilm",
    max_calls: int = 8,
    limit: int | None = None,
    threads: int = 1,
    progress: bool = True,
    models: Any = None,
    fresh: bool = False,
    gold_evidence: bool = True,
    confirm: bool = True,
    judge_evidence: bool = False,
) -> Any:
    """Score attribution methods on the benchmark in `bench`; print accuracy, cost and confusion tables. The task
    model replays the cases for counterfactual, and for graphtrace's confirmation unless `confirm` is off; the cost
    columns show the attributor's calls and tokens and, beside them, the replays' task-model calls and the upstream
    verdicts a replay confirmed."""
    from memtrace_opt.attribution import AttributionConfig, LMAnswerJudge, method_names
    from memtrace_opt.attribution.protocol import JUDGED_METHODS
    from memtrace_opt.benchmarks.memtracebench.evaluate import (
        confusion_table,
        eval_bench,
        reference_agreement,
        replays,
        score_tables,
    )
    from memtrace_opt.errors import ConfigError

    unknown = [m for m in methods if m not in method_names()]
    if unknown:
        raise ConfigError(f"unknown attribution method(s) {', '.join(unknown)}; choose from {', '.join(method_names())}")
    lm = task_lm = judge = None
    roles = roles or getattr(models, "roles", None) or ModelRoles()
    check_judge_evidence(judge_evidence, roles)
    config = AttributionConfig(embedder=embedder, max_lm_calls=max_calls, confirm=confirm, judge_evidence=judge_evidence)
    replayed = any(replays(m, config) for m in methods)
    judged = roles.judge is not None and any(m in JUDGED_METHODS for m in methods)
    needed = tuple(role for role, used in (("attributor", any(m not in LM_FREE_METHODS for m in methods)),
                                           ("task", replayed), ("judge", judged)) if used)
    if needed:
        built = _models(roles, models, needed)
        lm = built.attributor if "attributor" in needed else None
        task_lm = built.task if replayed else None
        judge = LMAnswerJudge(built.judge) if judged else None
    out_console = console()

    def tick(method: str, done: int, total: int) -> None:
        if progress and (done == total or done % 25 == 0):
            out_console.log(f"{method}: {done}/{total}")

    scores = eval_bench(bench, methods, lm=lm, config=config,
                        limit=limit, progress=tick, num_threads=threads, task_lm=task_lm, fresh=fresh,
                        gold_evidence=gold_evidence, reference=True, judge=judge)
    for table in score_tables(scores):
        out_console.print(table)
    for score in (s for s in scores if not s.reference):
        sources = list(score.per_source) if len(score.per_source) > 1 else [None]
        for source in sources:
            out_console.print(confusion_table(score, source))
    agreement = reference_agreement(scores)
    if agreement is not None:
        out_console.print(f"lineage agrees with the human labels on {agreement.n} cases: error type "
                          f"{agreement.rate(agreement.type_hits):.0%}, op {agreement.rate(agreement.op_hits):.0%}")
    return scores


@bench_app.command("build")
@with_model_flags
def bench_build_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the benchmark into.")],
    system: Annotated[Optional[list[str]], typer.Option("--system", "-s", help="Memory system (repeatable).")] = None,  # noqa: UP045
    data: Annotated[str, typer.Option("--data", "-d", help="PATH[:SAMPLE_ID], locomo, longmemeval or sample.")] = "sample",
    sessions: Annotated[Optional[str], typer.Option(help="Keep sessions A-B (1-based, inclusive).")] = None,  # noqa: UP045
    sample: Annotated[Optional[list[str]], typer.Option(help="Keep this conversation / question id (repeatable).")] = None,  # noqa: UP045
    limit: Annotated[Optional[int], typer.Option(min=1, help="Keep the first N questions.")] = None,  # noqa: UP045
    kind: Annotated[Optional[list[str]], typer.Option(help="Error type to inject (repeatable; default all).")] = None,  # noqa: UP045
    per_kind: Annotated[int, typer.Option(min=0, help="Injected cases per error type, system and conversation (0: none, only the natural and gold cases).")] = 2,
    program_embedder: Annotated[Optional[str], typer.Option(help="Embedder the systems search with (minilm or hash).")] = None,  # noqa: UP045
    embedder: Annotated[str, typer.Option(help="Embedder for pseudo-evidence in the labelling analysis.")] = "minilm",
    natural: Annotated[bool, typer.Option("--natural/--no-natural", help="Label the systems' own failures (lineage).")] = True,
    gold: Annotated[bool, typer.Option("--gold/--no-gold", help="GoldError cases from LoCoMo's answer-key fixes.")] = True,
    seed: Annotated[int, typer.Option(help="Seed for picking injection targets.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    *,
    roles: ModelRoles,
    config: Path | None,
) -> None:
    """Build MemTraceBench: inject faults of each error type and replay, label natural failures, add GoldError
    cases; writes cases.jsonl, graphs/, hf/ (a Hugging Face dataset) and manifest.json under --out."""
    chosen = data_slice(sessions, limit=limit, samples=sample) if sessions or sample or limit is not None else None
    bench_build_impl(out, list(system or ["mem0"]), data=data, roles=roles, kinds=kind, per_kind=per_kind,
                     program_embedder=program_embedder, embedder=embedder, natural=natural, gold=gold, seed=seed,
                     data_slice=chosen, progress=not quiet)


@bench_app.command("eval")
@with_model_flags
def bench_eval_command(
    bench: Annotated[Path, typer.Argument(help="Benchmark directory (holds cases.jsonl).")],
    method: Annotated[Optional[list[str]], typer.Option("--method", "-m", help="Attribution method (repeatable).")] = None,  # noqa: UP045
    embedder: Annotated[str, typer.Option(help="Embedder for pseudo-evidence: minilm or hash.")] = "minilm",
    max_calls: Annotated[int, typer.Option(min=1, help="Attributor LM calls per case at most (graphtrace; its replays on "
                                                      "the task model are not among them).")] = 8,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Score the first N cases only.")] = None,  # noqa: UP045
    threads: Annotated[int, typer.Option(min=1, help="Cases attributed in parallel.")] = 1,
    fresh: Annotated[bool, typer.Option("--fresh", help="Attribute every case again (default: resume).")] = False,
    gold_evidence: Annotated[bool, typer.Option(
        "--gold-evidence/--no-gold-evidence",
        help="Show the methods the gold evidence ids, or hide them (pseudo-evidence, as on data without them; "
             "verdicts go to BENCH/eval-pseudo/).")] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    confirm: Annotated[bool, typer.Option("--confirm/--no-confirm", help="graphtrace: confirm a verdict on an "
                                          "upstream op by replaying its repair on the task model.")] = True,
    judge_evidence: JudgeEvidenceOption = False,
    *,
    roles: ModelRoles,
    config: Path | None,
) -> None:
    """Score attribution methods on MemTraceBench: type and op accuracy (overall, by system), a confusion
    matrix, cost per case (the attributor's LM calls and tokens, mean; beside them the task model's replayed calls,
    median / total, and the share of upstream verdicts a replay confirmed, true / false / none); every table again
    per label source (injected, lineage, human), a verdict right when it names any of the label's acceptable ops, and lineage's agreement with the human labels as a reference. Verdicts and scores go to BENCH/eval/; each verdict is written as its case ends, and
    a stopped eval resumes where it stopped (--fresh starts over, e.g. with another attributor model)."""
    bench_eval_impl(bench, list(method or ["lineage"]), roles=roles, embedder=embedder, max_calls=max_calls,
                    limit=limit, threads=threads, progress=not quiet, fresh=fresh, gold_evidence=gold_evidence,
                    confirm=confirm, judge_evidence=judge_evidence)
