"""The README and docs stay true: every command they show parses, their local links resolve, the README is short.

A command is a line of a ```bash block (continuation lines joined, `&&` chains split, leading `VAR=value`
assignments skipped). `memtrace ...` lines run as `memtrace ... --help` through typer's CliRunner: an unknown
command or option fails there, and nothing runs. `python benchmarks/X.py ...` lines are parsed by the script's
own argparse parser, stopped before the benchmark starts (argparse reads `--help` as soon as it meets it, so
`--help` alone would let an unknown option through). Files that do not exist yet are not checked.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memtrace_opt.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]
README_LIMIT = 12 * 1024
# pages the README links to that other work adds; a link to them is checked once they exist
PLANNED = {"docs/cli.md", "docs/tutorial.md"}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def shown_commands(path: Path) -> list[tuple[str, list[str]]]:
    """(where, argv) for every command of the file's bash blocks."""
    text = path.read_text(encoding="utf-8")
    commands = []
    for match in _FENCE.finditer(text):
        if match.group(1) not in ("bash", "sh", "shell"):
            continue
        block_line = text[:match.start()].count("\n") + 2
        for offset, line in enumerate(match.group(2).replace("\\\n", " ").splitlines()):
            tokens = shlex.split(line, comments=True)
            where = f"{path.relative_to(ROOT)}:{block_line + offset}"
            while tokens:
                cut = tokens.index("&&") if "&&" in tokens else len(tokens)
                argv, tokens = tokens[:cut], tokens[cut + 1:]
                while argv and _ENV.match(argv[0]):
                    argv = argv[1:]
                if argv:
                    commands.append((where, argv))
    return commands


ALL = [c for path in DOCS if path.is_file() for c in shown_commands(path)]
MEMTRACE = [c for c in ALL if c[1][0] == "memtrace"]
BENCHMARKS = [c for c in ALL if c[1][0] == "python" and len(c[1]) > 1 and c[1][1].startswith("benchmarks/")]


def test_the_docs_show_commands_of_both_kinds():
    assert len(MEMTRACE) >= 20 and len(BENCHMARKS) >= 10
    assert any(argv[:2] == ["memtrace", "optimize"] for _, argv in MEMTRACE)  # the main job, from `&&`


@pytest.mark.parametrize(("where", "argv"), MEMTRACE, ids=[w for w, _ in MEMTRACE])
def test_every_memtrace_command_shown_parses(where: str, argv: list[str]) -> None:
    result = CliRunner().invoke(app, [*argv[1:], "--help"])
    assert result.exit_code == 0, f"{where}: {' '.join(argv)}\n{result.output}"
    assert "Usage:" in result.output


class _Parsed(Exception):
    pass


@pytest.mark.parametrize(("where", "argv"), BENCHMARKS, ids=[w for w, _ in BENCHMARKS])
def test_every_benchmark_command_shown_parses(where: str, argv: list[str], monkeypatch) -> None:
    script = ROOT / argv[1]
    assert script.is_file(), f"{where}: no {argv[1]}"

    def parse_and_stop(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        _, extras = self.parse_known_args(args, namespace)
        assert not extras, f"{where}: {argv[1]} does not know {extras}"
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)
    module = importlib.import_module(f"memtrace_opt.benchmarks.{script.stem}")
    try:
        module.main(argv[2:])
    except _Parsed:
        pass
    except SystemExit as exc:  # `--help` itself, or argparse refusing the argv
        assert exc.code == 0, f"{where}: {' '.join(argv)} does not parse"
    else:
        pytest.fail(f"{where}: {argv[1]} returned without parsing its arguments")


def test_a_bad_command_is_caught():
    """The checks above can fail: an unknown option, an unknown command, an unknown benchmark flag."""
    assert CliRunner().invoke(app, ["run", "--no-such-flag", "--help"]).exit_code != 0
    assert CliRunner().invoke(app, ["nosuchcommand", "--help"]).exit_code != 0
    module = importlib.import_module("memtrace_opt.benchmarks.bench_optimize")
    with pytest.raises(SystemExit):
        module.main(["--no-such-flag"])  # argparse exits on it before any benchmark work


@pytest.mark.parametrize("path", [p for p in DOCS if p.is_file()], ids=lambda p: str(p.relative_to(ROOT)))
def test_local_links_resolve(path: Path) -> None:
    missing = []
    for target in _LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a web address, or an anchor on the same page
        resolved = (path.parent / target.split("#")[0]).resolve()
        if not resolved.exists() and str(resolved.relative_to(ROOT)) not in PLANNED:
            missing.append(target)
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_readme_is_short():
    assert (ROOT / "README.md").stat().st_size <= README_LIMIT


_BUILDS_LLAMA = re.compile(r"pip install\b.*(\[[^\]]*\b(local|serve)\b|llama-cpp-python)")


def test_every_shown_llama_cpp_build_uses_the_same_cmake_args():
    """Each shown command that builds llama.cpp (the local or serve extra, or llama-cpp-python itself) sets the
    CMAKE_ARGS the code names (no AMX path: docs/engine.md), and CI runs the README's test command verbatim."""
    from memtrace_opt.lm.embedded import LLAMA_CMAKE_ARGS

    ci = ROOT / ".ci" / "run"
    lines = [(f".ci/run:{n}", line) for n, line in enumerate(ci.read_text(encoding="utf-8").splitlines(), 1)]
    for path in DOCS:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for match in _FENCE.finditer(text):
                if match.group(1) in ("bash", "sh", "shell"):
                    first = text[:match.start()].count("\n") + 2
                    lines += [(f"{path.relative_to(ROOT)}:{first + i}", line)
                              for i, line in enumerate(match.group(2).splitlines())]
    builds = [(where, line) for where, line in lines if _BUILDS_LLAMA.search(line) and not line.lstrip().startswith("#")]
    assert len(builds) >= 4  # the README's two, CI's, the served model's
    wrong = [where for where, line in builds if shlex.split(line)[0] != f"CMAKE_ARGS={LLAMA_CMAKE_ARGS}"]
    assert not wrong, f"these do not start with CMAKE_ARGS=\"{LLAMA_CMAKE_ARGS}\": {wrong}"
    readme_test = next(line for where, line in builds if where.startswith("README.md:") and "pytest" in line)
    assert readme_test in ci.read_text(encoding="utf-8").splitlines()
