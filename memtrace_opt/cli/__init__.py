"""The `memtrace` command line. Thin commands over plain functions that tests call directly.

Each command group lives in its own module and registers itself on `app` when imported below.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import typer  # noqa: E402

from memtrace_opt.errors import MemtraceError  # noqa: E402

app = typer.Typer(
    name="memtrace",
    help="Trace, attribute and repair LLM memory systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules register themselves on `app`.
from memtrace_opt.cli import commands  # noqa: E402,F401


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and turn a MemtraceError into one line on stderr and exit 2."""
    try:
        app(args=argv, standalone_mode=False)
    except MemtraceError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors come through standalone_mode=False
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
