"""The optimized program loads in plain DSPy and through the one-line API."""

from __future__ import annotations

import json

import pytest
from optfixtures import BAD_EXTRACT, EXTRACT

from memtrace_opt.api import load_optimized
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import instructions_of, save_program, with_instruction
from memtrace_opt.programs.mem0 import Mem0Memory
from memtrace_opt.programs.rag import RAGConfig, RAGMemory


def test_saved_program_loads_in_plain_dspy_and_through_the_api(tmp_path, planted):
    path = save_program(planted, tmp_path / "program.json")
    plain = Mem0Memory()
    plain.load(str(path))
    assert instructions_of(plain)[EXTRACT] == BAD_EXTRACT
    loaded = load_optimized(tmp_path)  # a run directory works too
    assert isinstance(loaded, Mem0Memory) and instructions_of(loaded) == instructions_of(planted)
    assert json.loads(path.read_text())["memtrace"]["system"] == "mem0"


def test_settings_travel_with_the_program(tmp_path):
    program = with_instruction(RAGMemory(RAGConfig(top_k=3)), "answer.predict", "Answer from the context.")
    path = save_program(program, tmp_path / "p.json")
    loaded = load_optimized(path)
    assert isinstance(loaded, RAGMemory) and loaded.config.top_k == 3
    assert instructions_of(loaded)["answer.predict"] == "Answer from the context."


def test_rewrites_never_touch_other_copies():
    original = Mem0Memory()
    before = instructions_of(original)
    changed = with_instruction(original, EXTRACT, "new text")
    assert instructions_of(original) == before and instructions_of(Mem0Memory()) == before
    assert instructions_of(changed)[EXTRACT] == "new text"
    with pytest.raises(ConfigError):
        with_instruction(original, "no.such.predict", "x")


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        load_optimized(tmp_path / "nothing.json")


def test_one_line_optimize_and_load(tmp_path):
    from memtrace_opt.api import optimize
    from memtrace_opt.lm.roles import ModelRoles, ModelSpec

    summary = optimize("rag", out=tmp_path / "run", preset="quick", roles=ModelRoles(task=ModelSpec("fake")))
    assert summary.run_dir == tmp_path / "run" and summary.lm_calls <= 60
    assert isinstance(load_optimized(summary.run_dir), RAGMemory)


def test_prompt_changes_name_new_instructions_and_new_demos():
    import dspy

    from memtrace_opt.optimizers.comparison.compare import CompareRow
    from memtrace_opt.optimizers.core.program_io import changed_prompts, demo_changes

    student = Mem0Memory()
    program = with_instruction(student, EXTRACT, "Write down every fact.")
    assert changed_prompts(student, program) == [EXTRACT] and demo_changes(student, program) == {}
    with_demos = student.deepcopy()
    dict(with_demos.named_predictors())["answer.predict"].demos = [dspy.Example(question="q", answer="a")]
    assert changed_prompts(student, with_demos) == ["answer.predict"]  # BootstrapFewShot's change: a name
    assert demo_changes(student, with_demos) == {"answer.predict": 1}  # and its count, apart
    assert changed_prompts(student, student.deepcopy()) == [] and demo_changes(student, student.deepcopy()) == {}
    row = CompareRow("bootstrap", 0.2, 0.3, 1, 0, 1.0, changed_predictors=["answer.predict", EXTRACT],
                     demos={"answer.predict": 1})
    assert row.changed_label() == f"answer.predict (1 demo), {EXTRACT}"
    assert row.to_dict()["changed_predictors"] == ["answer.predict", EXTRACT]  # names only, for tools
