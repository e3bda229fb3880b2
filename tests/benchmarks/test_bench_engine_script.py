"""The engine benchmark's offline parts: reading a run's graphs into write/read seconds and reply checks."""

from __future__ import annotations

from pathlib import Path

from memtrace_opt.benchmarks.bench_engine import graph_figures, long_context_prompts, reply_problems
from memtrace_opt.data import DataSlice
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.tracing import load_graph


def test_a_fake_mem0_run_gives_seconds_per_session_and_per_op_counts(tmp_path: Path):
    roles = ModelRoles(task=ModelSpec(model="fake"))
    out = tmp_path / "mem0"
    run_system(RunRequest(system="mem0", data="sample", out=out, roles=roles, judge=False), progress=False,
               models=Models.from_roles(roles))
    figures = graph_figures([load_graph(p) for p in (out / "graphs").glob("*.json")])
    assert set(figures["session_s"]) == {"1", "2", "3"}  # the sample's three sessions
    ops = figures["ops"]
    assert ops["mem0.extract_facts"]["calls"] >= 3 and ops["mem0.answer"]["calls"] >= 1
    assert ops["mem0.extract_facts"]["unparseable"] == 0 and ops["mem0.extract_facts"]["cut"] == 0


def test_long_context_prompts_are_built_without_the_model(tmp_path: Path):
    prompts = long_context_prompts("sample", DataSlice(), 2, tmp_path / "lc")
    assert len(prompts) == 2
    assert prompts[0][0]["role"] == "system" and "[[ ## question ## ]]" in prompts[0][-1]["content"]


def test_reply_checks_tell_a_cut_or_broken_list_from_a_good_one():
    import dspy

    messages = dspy.ChatAdapter().format(dspy.Signature("new_messages -> facts: list[str]"), demos=[],
                                         inputs={"new_messages": "x"})
    good = '[[ ## facts ## ]]\n["a", "b"]\n\n[[ ## completed ## ]]'
    assert reply_problems(messages, good) == (True, False)
    assert reply_problems(messages, '[[ ## facts ## ]]\n["a", "b", "b", "b') == (False, True)
    assert reply_problems(messages, "Sure! Here are the facts.") == (False, True)
