"""The answers script: its accuracy table and, with --questions, the held-out questions some program gets wrong."""

from __future__ import annotations

from memtrace_opt.benchmarks.bench_answers import main
from memtrace_opt.optimizers.core.program_io import save_program
from memtrace_opt.programs import make_program

ARGS = ["--system", "long_context", "--lm", "fake", "--data", "sample", "--train", "", "--val", "", "--test", "",
        "--categories", ""]


def test_questions_lists_each_wrong_question_once_with_every_programs_answer(tmp_path, capsys):
    save_program(make_program("long_context"), tmp_path / "programs" / "same.json")
    assert main([str(tmp_path), *ARGS, "--questions"]) == 0
    out = capsys.readouterr().out
    accuracy = float(out.split("accuracy ", 1)[1].split(",", 1)[0])
    tables = [[line for line in block.splitlines() if line.startswith("| ")] for block in out.split("\n\n")]
    scores, questions = tables[1], tables[2]
    assert scores[1].startswith("| same | ") and "+0 / -0" in scores[1]  # the same program: nothing fixed or broken
    assert questions[0] == "| question | gold | unoptimized | same |"
    rows = questions[1:]  # the separator line does not start with "| "
    total = int(out.split(" held-out questions", 1)[0])
    assert rows and len(rows) == round(total * (1 - accuracy))  # each question it gets wrong, once
    for row in rows:
        cells = row.strip("| ").split(" | ")
        assert len(cells) == 4 and cells[2] == cells[3] and cells[2].startswith("✗ ")


def test_without_questions_there_is_no_question_table(tmp_path, capsys):
    save_program(make_program("long_context"), tmp_path / "programs" / "same.json")
    assert main([str(tmp_path), *ARGS]) == 0
    assert "| question | gold |" not in capsys.readouterr().out
