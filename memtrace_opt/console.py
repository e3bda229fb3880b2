"""The `memtrace` console script (`[project.scripts]`).

It imports the command tree (`memtrace_opt.cli`, which loads dspy and litellm: a second or more) inside `main`,
so that Ctrl-C while the CLI loads exits 130 with one line, as it does later in a run (docs/cli.md). This module
imports nothing heavy itself.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

EXIT_INTERRUPTED = 130


def main() -> None:
    """Import the CLI and run it (`memtrace_opt.cli.main`, which exits with the shell contract's code); a
    KeyboardInterrupt anywhere, the import included, prints `interrupted` and exits 130."""
    try:
        from memtrace_opt.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
