"""`memtrace run`: run a memory system over a dataset slice into a run directory."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.cli import app
from memtrace_opt.cli.common import console, data_slice, with_model_flags
from memtrace_opt.cli.options import GoldOption
from memtrace_opt.config import load_config
from memtrace_opt.config_schema import validate_program_settings
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.programs import SYSTEMS

SYSTEM_HELP = f"Memory system: {', '.join(SYSTEMS)}, or an import path package.module:Class."


def default_out(system: str) -> Path:
    return Path("runs") / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{system.replace(':', '_').replace('.', '_')}"


@app.command("run")
@with_model_flags
def run_command(
    system: Annotated[Optional[str], typer.Option("--system", "-s", help=SYSTEM_HELP)] = None,  # noqa: UP045
    data: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--data", "-d", help="PATH[:SAMPLE_ID], or locomo / longmemeval / sample (the packaged sample)."),
    ] = None,
    sessions: Annotated[Optional[str], typer.Option(help="Keep sessions A-B (1-based, inclusive).")] = None,  # noqa: UP045
    category: Annotated[Optional[list[str]], typer.Option(help="Keep only this question category (repeatable).")] = None,  # noqa: UP045
    limit: Annotated[Optional[int], typer.Option(min=1, help="Keep the first N questions.")] = None,  # noqa: UP045
    gold: GoldOption = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory (default runs/<time>-<system>).")] = None,  # noqa: UP045
    program: Annotated[Optional[Path], typer.Option("--program", help="A compiled program.json to load.")] = None,  # noqa: UP045
    judge: Annotated[Optional[bool], typer.Option("--judge/--no-judge", help="Score with the LLM judge too.")] = None,  # noqa: UP045
    threads: Annotated[Optional[int], typer.Option(min=1, help="Conversations run in parallel.")] = None,  # noqa: UP045
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display and no time estimate on stderr.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the killed run in --out: keep its finished conversations, run the others again.")] = False,
    *,
    roles: ModelRoles,
    config: Path | None,
) -> None:
    """Run a memory system over a dataset slice: trace every operation, score every answer.

    Writes config.yaml, manifest.json, cases.jsonl, events.jsonl and graphs/ under --out, and prints accuracy
    per category. Settings come from --config (keys: system, data, sessions, categories, limit, out, program,
    judge, threads, settings) with flags taking precedence.
    """
    from memtrace_opt.runner import RunRequest, run_system

    cfg = load_config(config)
    merged: dict[str, Any] = {
        "system": system or cfg.get("system"),
        "data": data or cfg.get("data") or "sample",
        "sessions": sessions or cfg.get("sessions"),
        "categories": tuple(category) if category else cfg.get("categories"),
        "limit": limit if limit is not None else cfg.get("limit"),
        "judge": judge if judge is not None else cfg.get("judge", True),
        "threads": threads if threads is not None else cfg.get("threads", 1),
    }
    if not merged["system"]:
        raise typer.BadParameter("give --system (or `system:` in --config)", param_hint="--system")
    if resume and out is None and not cfg.get("out"):
        raise typer.BadParameter("--resume needs the run directory to continue: give --out", param_hint="--out")
    request = RunRequest(
        system=merged["system"],
        data=str(merged["data"]),
        out=out if out is not None else Path(cfg["out"]) if cfg.get("out") else default_out(merged["system"]),
        roles=roles,
        data_slice=data_slice(merged["sessions"], merged["categories"], merged["limit"], gold=gold),
        program_settings=validate_program_settings(merged["system"], cfg.get("settings")),
        program_path=program or (Path(cfg["program"]) if cfg.get("program") else None),
        judge=bool(merged["judge"]),
        threads=int(merged["threads"]),
        resume=resume,
    )
    out_console = console()
    summary = run_system(request, progress=not quiet)
    out_console.print(summary.table.to_rich(title=f"{request.system} on {request.data}"))
    out_console.print(
        f"{summary.correct}/{summary.questions} correct, {summary.op_failures} op failures, "
        f"{summary.seconds:.1f} s -> {summary.run_dir}"
    )
    if summary.failed:  # the job ran and failed: what finished is written, exit 1
        typer.echo(f"error: {summary.error}; the finished conversations are kept in {summary.run_dir}", err=True)
        raise typer.Exit(1)
