"""docs/tutorial.md runs as written: its file is saved, its `memtrace` lines go to the CLI, its Python runs."""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys
from pathlib import Path

import pytest

from memtrace_opt.cli import main

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str, str]]:
    """(language, info, code) of every fenced block, in order."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8"))]


def run_block(language: str, info: str, code: str, namespace: dict) -> None:
    if language == "python" and info.startswith("file="):
        Path(info.removeprefix("file=")).write_text(code, encoding="utf-8")
    elif language == "python":
        exec(compile(code, f"{TUTORIAL.name}:python", "exec"), namespace)
    elif language == "bash":
        for line in code.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                argv = shlex.split(line, comments=True)
                assert argv[0] == "memtrace", f"the tutorial runs memtrace commands only: {line}"
                try:
                    main(argv[1:])
                except SystemExit as stop:  # typer's standalone mode exits 0 on success
                    assert stop.code in (0, None), f"{line!r} exited with {stop.code}"
    else:
        raise AssertionError(f"unexpected block language {language!r}")


def test_the_tutorial_runs_as_written(tmp_path, monkeypatch, capsys, caplog):
    caplog.set_level(logging.WARNING, logger="memtrace_opt.runner")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI finds mynotes.py in the current directory
    monkeypatch.delitem(sys.modules, "mynotes", raising=False)
    found = blocks()
    assert [lang for lang, _, _ in found] == ["python", "bash", "bash", "python", "bash", "python"]
    namespace: dict = {"__name__": "tutorial"}
    for language, info, code in found:
        run_block(language, info, code, namespace)

    run = tmp_path / "runs" / "notes"
    assert (run / "report.html").is_file() and (run / "graphs" / "sample-1.json").is_file()
    blamed = namespace["blamed"]
    assert ("ExtractionError", "notes.write", "write.module.predict") in blamed  # what section 3 says
    manifest = json.loads((tmp_path / "runs" / "notes-opt" / "manifest.json").read_text())
    chosen = [r.get("chosen_predictor") for r in manifest["rounds"]]
    assert "write.module.predict" in chosen  # the optimizer went for the wrapped predictor
    assert not [r for r in caplog.records if r.getMessage().startswith("lineage:")]  # its lineage holds
    out = capsys.readouterr().out
    assert "ExtractionError" in out and out.strip().splitlines()[-1]  # the deployed program answered


@pytest.mark.parametrize("language", ["bash"])
def test_only_memtrace_commands_are_in_the_shell_blocks(language):
    lines = [line for lang, _, code in blocks() if lang == language for line in code.splitlines() if line.strip()]
    assert lines and all(line.startswith("memtrace ") for line in lines)
