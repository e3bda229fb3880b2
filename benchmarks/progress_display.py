"""The benchmark scripts' progress: the display of the `memtrace` commands (a live one on a terminal, log lines
otherwise), on stderr, so that a script's tables on stdout stay clean.

    if __name__ == "__main__":
        sys.exit(with_progress(main))
"""

from __future__ import annotations

from collections.abc import Callable

from memtrace_opt import progress


def with_progress(main: Callable[[], int]) -> int:
    """`main()` with the progress display installed for it; its exit code."""
    with progress.reporting(progress.for_stderr()):
        return main()
