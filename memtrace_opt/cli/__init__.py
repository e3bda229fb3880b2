"""The `memtrace` command line. Thin commands over plain functions that tests call directly.

Each command group lives in its own module and registers itself on `app` when imported below.
"""

from __future__ import annotations

import importlib
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

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _click_errors() -> tuple[type[Exception], ...]:
    """The ClickException classes of the click typer uses (its vendored copy since typer 0.29) and of click
    itself where it is installed (a plugin may raise those)."""
    found: list[type[Exception]] = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found.append(module.ClickException)
    return tuple(found)


def _click_error_text(exc: Exception) -> str:
    """A click error as what the user reads: the help for a bare `memtrace`, else one line and where the help is."""
    message = str(exc.format_message()) if hasattr(exc, "format_message") else str(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":
        return message
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"error: {' '.join(message.split())}{hint}"


def run_cli(argv: list[str] | None = None) -> int:
    """Run the app on `argv` and return the exit code of the shell contract (docs/cli.md):

    0 success; 1 the job ran and reported failures; 2 bad input or usage (one line on stderr, no traceback);
    130 interrupted (what finished is written, the manifest says `status: interrupted`).
    """
    click_errors = _click_errors()
    try:
        code = app(args=argv, standalone_mode=False, prog_name="memtrace")
    except MemtraceError as exc:
        typer.echo(f"{'interrupted' if exc.exit_code == EXIT_INTERRUPTED else 'error'}: {exc}", err=True)
        return exc.exit_code
    except typer.Exit as exc:  # raised past click only from a callback
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not isinstance(exc, click_errors):
            raise  # a bug: the traceback is what to report
        text = _click_error_text(exc)
        if text.strip():  # a bare `memtrace` has printed its help already
            typer.echo(text, err=True)
        return EXIT_USAGE  # click's usage errors, and its file errors: bad input either way
    if code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt outside our jobs into Exit(130)
        typer.echo("interrupted", err=True)
    return code if isinstance(code, int) and not isinstance(code, bool) else EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """The `memtrace` entry point: `run_cli`; returns on success, else exits with its code."""
    code = run_cli(argv)
    if code != EXIT_OK:
        sys.exit(code)
