"""`memtrace attribute RUN --method M`: the root cause of every failed question of a run."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt import progress as report
from memtrace_opt.attribution.protocol import JUDGED_METHODS, LM_FREE_METHODS, REPLAY_METHODS
from memtrace_opt.cli import app
from memtrace_opt.cli.common import console, with_model_flags
from memtrace_opt.cli.options import JudgeEvidenceOption, check_judge_evidence
from memtrace_opt.lm.roles import ModelRoles, check_roles


def attribute_command_impl(
    run: Path,
    method: str,
    *,
    roles: ModelRoles | None = None,
    embedder: str = "minilm",
    max_calls: int = 8,
    threads: int = 1,
    limit: int | None = None,
    progress: bool = True,
    models: Any = None,
    confirm: bool = True,
    judge_evidence: bool = False,
) -> Any:
    """Attribute RUN's failed cases and print the summary tables. Returns the AttributeRunResult.

    counterfactual replays the cases on the task model; so does graphtrace to confirm its verdicts (`confirm`)
    when the run records the system it ran. With the judge role set (`roles.judge`), the methods that take a judge
    get it for their GoldError tests (the test of the gold evidence only with `judge_evidence`).
    Progress goes to the current reporter (`memtrace_opt.progress`), else to stderr; `progress=False`: none."""
    from memtrace_opt.attribution import AttributionConfig, LMAnswerJudge, method_names
    from memtrace_opt.attribution.runs import attribute_run, replayable, run_replay_provider, summary_tables
    from memtrace_opt.errors import ConfigError
    from memtrace_opt.lm.models import Models

    if method not in method_names():
        raise ConfigError(f"unknown attribution method {method!r}; choose one of {', '.join(method_names())}")
    out = console()
    roles = roles or getattr(models, "roles", None) or ModelRoles()
    check_judge_evidence(judge_evidence, roles)
    replays = method == "counterfactual" or (method in REPLAY_METHODS and confirm and replayable(run))
    judged = roles.judge is not None and method in JUDGED_METHODS
    needed = tuple(role for role, used in (("attributor", method not in LM_FREE_METHODS), ("task", replays),
                                           ("judge", judged)) if used)
    if needed and models is None:
        check_roles(roles, needed)
        models = Models.from_roles(roles)
    lm = models.attributor if method not in LM_FREE_METHODS else None
    provider = run_replay_provider(run, models.task) if replays else None
    judge = LMAnswerJudge(models.judge) if judged else None
    config = AttributionConfig(embedder=embedder, max_lm_calls=max_calls, confirm=confirm, judge_evidence=judge_evidence)
    started: list[int] = []

    def advance(done: int, total: int, verdict: Any) -> None:
        if not started:  # the first case attributed: its total is known now
            started.append(total)
            report.stage(f"attributing ({method})", total=total, counts=(report.CASE,), level=1)
        report.advance(report.CASE)

    with _reporting(progress):
        if models is not None:
            report.watch(models.usage)
        result = attribute_run(run, method, lm=lm, config=config, progress=advance, num_threads=threads,
                               limit=limit, replay_provider=provider, judge=judge)
    for table in summary_tables(result.verdicts, result.cases):
        out.print(table)
    errors = sum(1 for v in result.verdicts if v.error)
    out.print(f"{result.new} attributed now, {result.skipped} already done, {errors} could not be attributed "
              f"-> {result.path}")
    return result


def _reporting(shown: bool) -> Any:
    """Where the progress goes: nowhere (`shown` False), the reporter already installed, or stderr."""
    if not shown:
        return report.silenced()
    if report.active():
        return contextlib.nullcontext()
    return report.reporting(report.for_stderr())


@app.command("attribute")
@with_model_flags
def attribute_command(
    run: Annotated[Path, typer.Argument(help="Run directory (holds cases.jsonl and graphs/).", file_okay=False)],
    method: Annotated[str, typer.Option("--method", "-m", help="lineage, graphtrace, counterfactual, "
                                        "all_at_once, step_by_step, binary_search, random, blame_response.")]
    = "graphtrace",
    embedder: Annotated[str, typer.Option(help="Embedder for pseudo-evidence: minilm or hash.")] = "minilm",
    max_calls: Annotated[int, typer.Option(min=1, help="LM calls per case at most (graphtrace).")] = 8,
    threads: Annotated[int, typer.Option(min=1, help="Cases attributed in parallel.")] = 1,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Attribute the first N failed cases only.")] = None,  # noqa: UP045
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    confirm: Annotated[bool, typer.Option("--confirm/--no-confirm", help="graphtrace: confirm a verdict on an "
                                          "upstream op by replaying its repair on the task model, where the run "
                                          "can be replayed.")] = True,
    judge_evidence: JudgeEvidenceOption = False,
    *,
    roles: ModelRoles,
    config: Path | None,
) -> None:
    """Find the root-cause operation of every failed question of RUN; append to RUN/verdicts.jsonl.

    Resumes: cases this method already attributed are skipped. Prints the error types and blamed
    operations per system.
    """
    attribute_command_impl(run, method, roles=roles, embedder=embedder, max_calls=max_calls, threads=threads,
                           limit=limit, progress=not quiet, confirm=confirm, judge_evidence=judge_evidence)
