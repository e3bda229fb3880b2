"""Ctrl-C in the first seconds of `memtrace` (the CLI's imports of dspy and litellm, model loading) exits 130 with
one line and no traceback, as it does later in a run (docs/cli.md)."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.lm.models import Models

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1"}

# imports memtrace_opt.console's main with every later import of dspy interrupted, as Ctrl-C would
INTERRUPTED_IMPORT = """
import sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "dspy" or name.startswith("dspy."):
            raise KeyboardInterrupt
        return None

from memtrace_opt.console import main
sys.meta_path.insert(0, Interrupt())
sys.argv = ["memtrace", "run", "--system", "rag", "--lm", "fake"]
main()
"""


def test_the_console_script_is_the_entry_that_guards_the_imports():
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts["memtrace"] == "memtrace_opt.console:main"
    probe = "import sys, memtrace_opt.console; print(sorted({'dspy', 'litellm', 'typer', 'memtrace_opt.cli'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True, text=True, timeout=60)
    assert loaded.stdout.strip() == "[]", loaded.stderr  # the entry module itself loads nothing slow


def test_an_interrupt_while_the_cli_imports_exits_130_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_IMPORT], cwd=tmp_path, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted\n"
    assert list(tmp_path.iterdir()) == []


def _imported(line: str) -> str:
    """The module an `-X importtime` line says has been imported ("" for another line)."""
    return line.rsplit("|", 1)[-1].strip() if line.startswith("import time:") else ""


def test_sigint_to_memtrace_while_it_loads_exits_130_without_a_traceback(tmp_path):
    script = Path(sysconfig.get_path("scripts")) / "memtrace"
    if not script.is_file():
        pytest.skip(f"no installed console script at {script}")
    # -X importtime: each finished import is a line on stderr, so the signal goes once `main` has begun to import
    # the CLI (typer is its first import; dspy and the command modules take a second or more after it)
    child = subprocess.Popen([sys.executable, "-X", "importtime", str(script), "run", "--system", "rag", "--lm",
                              "fake", "--no-judge", "-q", "--out", str(tmp_path / "run")],
                             cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen: list[str] = []
        assert child.stderr is not None
        for line in child.stderr:
            seen.append(line)
            if _imported(line) == "typer":
                child.send_signal(signal.SIGINT)
                break
        _, rest = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    err = "".join(seen) + rest
    assert child.returncode == 130, err
    assert "Traceback" not in err and err.rstrip().endswith("interrupted"), err[-2000:]
    assert not (tmp_path / "run").exists()  # stopped while the CLI loaded, before the run began


@pytest.mark.parametrize("argv", [
    ["run", "--system", "rag", "--lm", "fake", "--no-judge", "-q"],
    ["attribute", "RUN", "--method", "graphtrace", "--lm", "fake", "-q"],
])
def test_an_interrupt_while_the_models_load_exits_130_without_a_traceback(argv, tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Models, "from_roles", classmethod(interrupted))
    run = tmp_path / "run"
    run.mkdir()
    argv = [str(run) if a == "RUN" else a for a in argv]
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "new")]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted"), err
