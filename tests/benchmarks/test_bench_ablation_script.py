"""The instruction ablation script: how it cuts an instruction into sentences, and a dry run with the fake LM."""

from __future__ import annotations

import pytest

from memtrace_opt.benchmarks.bench_ablation import main, sentences, variants
from memtrace_opt.optimizers.core.program_io import instructions_of
from memtrace_opt.programs import make_program


def test_sentences_end_at_a_full_stop_or_a_line_break_before_a_capital():
    text = "Do the job.\nIf unsure, reply: None\nOtherwise answer in a few words. A date is\nwritten \"12 March 2034\"."
    assert sentences(text) == ["Do the job.", "If unsure, reply: None", "Otherwise answer in a few words.",
                               "A date is\nwritten \"12 March 2034\"."]


def test_each_variant_leaves_out_exactly_one_sentence_and_keeps_the_others_as_written():
    text = instructions_of(make_program("long_context"))["answer.predict"]
    parts = sentences(text)
    found = variants(text)
    assert found[0] == ("as it is", text)
    assert found[-1] == ("the first sentence alone", parts[0])
    cut = found[1:-1]
    assert len(cut) == len(parts) - 1
    for (label, variant), left_out in zip(cut, parts[1:], strict=True):
        assert left_out not in variant
        assert all(kept in variant for kept in parts if kept != left_out)
        assert label.startswith("without: ")
        assert " ".join(left_out.split()).startswith(label.removeprefix("without: ").removesuffix("..."))
    # the line break between "reply: None" and "Otherwise" survives leaving out another sentence
    assert "reply: None\nOtherwise" in cut[0][1]


def test_a_one_sentence_instruction_has_nothing_to_leave_out():
    assert variants("Answer briefly.") == [("as it is", "Answer briefly.")]


def test_dry_run_prints_one_row_per_variant(capsys):
    assert main(["--system", "rag", "--lm", "fake", "--data", "sample", "--train", "", "--val", "",
                 "--categories", ""]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    text = instructions_of(make_program("rag"))["answer.predict"]
    assert len(rows) == 1 + len(variants(text))  # the header, then one row per variant
    assert rows[1].startswith("| as it is | ") and "+0 / -0" in rows[1]  # the instruction against itself


def test_an_unknown_predictor_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--system", "rag", "--lm", "fake", "--data", "sample", "--predictor", "nope"])
    assert stopped.value.code == 2
    assert "no predictor 'nope'" in capsys.readouterr().err
