"""The split arguments the benchmark scripts share: a split error is a usage error, one line and exit 2, as the
`memtrace` commands give it (here through the optimizer comparison script)."""

from __future__ import annotations

import pytest
from runfixtures import write_conversations

from memtrace_opt.benchmarks.bench_optimize import main
from memtrace_opt.benchmarks.split_args import usage_errors
from memtrace_opt.errors import ConfigError


@pytest.mark.parametrize(("flags", "named"), [
    (["--train", "c-a", "--val", "c-b", "--test", "c-a"], "'c-a' is named by --train and --test"),
    (["--train", "c-a", "--val", "c-b", "--test", "c-b"], "'c-b' is named by --val and --test"),
    (["--train", "c-a", "--val", "c-x", "--test", "c-b"], "--val: "),  # no such conversation
])
def test_a_split_error_is_one_line_and_exit_2(flags, named, tmp_path, capsys):
    data = write_conversations(tmp_path / "three.json")
    argv = ["--systems", "rag", "--lm", "fake", "--data", str(data), "--sessions", "", "--categories", "", *flags,
            "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0] and "Traceback" not in err, err


def test_usage_errors_passes_the_exit_code_and_other_errors_through():
    @usage_errors
    def fine(argv: list[str] | None = None) -> int:
        return len(argv or [])

    @usage_errors
    def broken(argv: list[str] | None = None) -> int:
        raise ValueError("a bug")

    @usage_errors
    def misused(argv: list[str] | None = None) -> int:
        raise ConfigError("--per-split: expected a number")

    assert fine(["a", "b"]) == 2 and misused([]) == 2
    with pytest.raises(ValueError, match="a bug"):  # a bug keeps its traceback
        broken([])
