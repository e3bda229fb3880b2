"""`--system mem0ai`: the installed Mem0 2.x run through `add()` and `search()` with the scripted LM, traced into an
evolution graph whose units are Mem0's memory ids."""

from __future__ import annotations

import json
import uuid

import dspy
import pytest
from mem0ai_kit import KeptMemory, blamed, planted_replies, planted_skills, without
from required import need_mem0ai

from memtrace_opt.cli import main
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import with_instruction
from memtrace_opt.programs import make_program
from memtrace_opt.programs.mem0ai import _library
from memtrace_opt.programs.mem0ai.session import USER_ID, session_of
from memtrace_opt.testing import FakeCall, FakeEngine, Skill, fake_lm
from memtrace_opt.testing.mem0_skills import mem0_skills
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import trace_conversation

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
DOG = "mem0ai:sample-1:q0"  # "What is the name of Theo's dog?"


@pytest.fixture(autouse=True)
def mem0ai_2x() -> str:
    return need_mem0ai("2.")


def _mem_nodes(graph) -> dict[str, list[int]]:
    units: dict[str, list[int]] = {}
    for node, attrs in graph.nodes(data=True):
        if node.startswith("mem:"):
            units.setdefault(attrs["unit_id"], []).append(attrs["version"])
    return units


def test_a_sample_run_gives_a_graph_of_mem0_ids_with_their_versions_and_turns(sample):
    program = KeptMemory()
    with dspy.context(lm=fake_lm(default_skills())):
        traced = trace_conversation(program, sample)
    graph = traced.graph()
    memory = session_of(program.kept).memory
    stored = {item["id"]: item["memory"] for item in memory.get_all(filters={"user_id": USER_ID})["results"]}
    units = _mem_nodes(graph)
    assert stored and set(units) == set(stored)  # every unit is a memory Mem0 holds, under its own id
    for unit_id, versions in units.items():
        uuid.UUID(unit_id)
        assert sorted(versions) == list(range(1, len(memory.history(unit_id)) + 1))
        node = graph.nodes[f"mem:{unit_id}@1"]
        assert node["value"] == stored[unit_id] and node["source_turns"]  # the window's turns it came from
        writer = next(graph.predecessors(f"mem:{unit_id}@1"))
        assert graph.nodes[writer]["op"] == "mem0ai.store"
        assert graph.nodes[graph.nodes[writer]["parent"]]["op"] == "mem0ai.add"
    extracts = [n for n, a in graph.nodes(data=True) if a.get("op") == "mem0ai.extract"]
    assert len(extracts) == traced.op_counts["mem0ai.add"] and traced.failures == []
    call = graph.nodes[extracts[0]]
    assert call["role"] == "forms" and call["predictor"] == "extract.predict"
    messages = call["lm_calls"][0]["messages"]  # Mem0's own prompt and the reply, as the LM saw them
    assert "Memory Extractor" in messages[0]["content"] and "## New Messages" in messages[1]["content"]
    assert json.loads(call["lm_calls"][0]["response"])["memory"]
    assert {u for u, _ in graph.in_edges(extracts[0])} >= {f"turn:{t.dia_id}" for t in sample.sessions[0].turns[:6]}
    searches = [a for a in graph.nodes.values() if a.get("op") == "mem0ai.search"]
    assert len(searches) == len(sample.questions) and all(a["role"] == "retrieves" for a in searches)
    assert set(traced.answers) == {q.question_id for q in sample.questions}


def test_a_planted_extraction_failure_is_blamed_on_mem0s_extraction_call(tmp_path):
    # the extraction drops every memory about the dog: its name is asked and can only be lost there
    dog, graph = blamed(tmp_path / "run", planted_skills("mem0ai.extract", without("Biscuit")), DOG)
    assert (dog.error_type, dog.op, dog.predictor) == ("ExtractionError", "mem0ai.extract", "extract.predict")
    assert "Biscuit" in graph.nodes[dog.op_id]["inputs"]["messages"][1]["content"]  # it was shown the turn


def test_a_reply_mem0_cannot_read_is_a_counted_op_failure_still_blamed_on_the_extraction(tmp_path):
    # the reply about the dog stops mid-JSON, as a reply cut at the reply cap does: Mem0 stores nothing from it
    def cut(text: str) -> str:
        return text[: text.index("Biscuit")] if "Biscuit" in text else text

    out = tmp_path / "run"
    dog, graph = blamed(out, planted_replies("mem0ai.extract", cut), DOG)
    assert (dog.error_type, dog.op, dog.predictor) == ("ExtractionError", "mem0ai.extract", "extract.predict")
    error = graph.nodes[dog.op_id]["error"]
    assert "Mem0 reads nothing from this reply" in error and "ends before its JSON closes" in error
    extracts = [a for a in graph.nodes.values() if a.get("op") == "mem0ai.extract"]
    cut_ones = [a for a in extracts if not a["lm_calls"][0]["response"].endswith("}")]
    assert cut_ones and [a for a in extracts if a.get("error")] == cut_ones  # the replies that parse have no error
    assert not [a for a in graph.nodes.values() if a.get("vtype") == "memory" and "Biscuit" in a["value"]]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["op_failures"] == len(cut_ones)


def test_a_duplicate_mem0_drops_is_recorded_on_the_add_that_dropped_it(sample):
    said: list[dict] = []

    def repeat_the_first(memories: list[dict]) -> list[dict]:
        said.extend(memories[:1] if not said else [])
        return [*memories, {"id": str(len(memories)), "text": said[0]["text"], "attributed_to": "user"}]

    program = KeptMemory()
    with dspy.context(lm=fake_lm(planted_skills("mem0ai.extract", repeat_the_first))):
        graph = trace_conversation(program, sample, sample.questions[:1]).graph()
    texts = [a["value"] for a in graph.nodes.values() if a.get("vtype") == "memory"]
    assert texts.count(said[0]["text"]) == 1  # Mem0 stored it once
    dropped = [a["value"] for n, a in graph.nodes(data=True) if a.get("name") == "dropped" and a["value"]]
    first_id = next(a["unit_id"] for a in graph.nodes.values() if a.get("value") == said[0]["text"])
    later = [d for window in dropped for d in window if d["reason"] == "duplicate"]
    assert later and all(d == {"text": said[0]["text"], "reason": "duplicate", "duplicate_of": first_id} for d in later)
    first_window = dropped[0] if dropped and dropped[0][0]["reason"] == "repeated" else None
    assert first_window == [{"text": said[0]["text"], "reason": "repeated"}]  # said twice in one reply


def test_every_attribution_method_the_report_and_graph_show_work_on_its_runs(tmp_path, capsys):
    out = tmp_path / "run"
    main(["run", "--system", "mem0ai", "--data", "sample", "--lm", "fake", "--no-judge", "-q", "--limit", "4",
          "--out", str(out)])
    methods = ("lineage", "graphtrace", "counterfactual", "all_at_once", "step_by_step", "binary_search")
    for method in methods:
        main(["attribute", str(out), "--method", method, "--lm", "fake", "-q"])
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    for method in methods:  # the baselines' verdicts name what the scripted LM picks, maybe no op
        mine = [v for v in verdicts if v["method"] == method]
        assert mine and all(v["error"] is None for v in mine), method
        assert all(v["op"] for v in mine) or method not in methods[:3], method
    main(["report", str(out)])
    assert (out / "report.html").is_file()
    capsys.readouterr()
    main(["graph", "show", str(out), "--question", "sample-1:q1"])  # "What subject does Theo teach?"
    shown = capsys.readouterr().out
    assert "turn:D1:2" in shown and "mem0ai.extract" in shown


def test_custom_instructions_set_by_a_rewrite_reach_mem0s_prompt(sample):
    rule = "Keep every date, resolved to an absolute date."
    seeded = make_program("mem0ai")
    assert seeded.mem0_config() == {}  # Mem0's own prompt: nothing to configure
    program = with_instruction(seeded, "extract.predict", f"{seeded.extract.instruction}\n{rule}")
    assert program.mem0_config() == {"custom_instructions": rule}
    engine = FakeEngine(skills=default_skills())
    with dspy.context(lm=fake_lm(engine=engine)):
        trace_conversation(program, sample, sample.questions[:1])
    prompts = [c.messages[-1]["content"] for c in engine.calls if "Memory Extractor" in c.messages[0]["content"]]
    assert prompts and all(f"## Custom Instructions\n{rule}" in p for p in prompts)
    settings = make_program("mem0ai", {"custom_instructions": rule})  # Mem0's own key as a setting
    assert settings.mem0_config() == {"custom_instructions": rule}


def test_a_recorded_extraction_re_rendered_under_a_rewrite_is_the_prompt_mem0_builds_with_it(sample):
    rule = "Keep every date, resolved to an absolute date.\n\nName the person each memory is about."
    seeded = make_program("mem0ai")
    rewritten = with_instruction(seeded, "extract.predict", f"{seeded.extract.instruction}\n{rule}")
    sent = []
    for program in (seeded, rewritten):
        engine = FakeEngine(skills=default_skills())
        with dspy.context(lm=fake_lm(engine=engine)):
            trace_conversation(program, sample, sample.questions[:1])
        sent.append([list(c.messages) for c in engine.calls if "Memory Extractor" in c.messages[0]["content"]][0])
    seed_messages, rule_messages = sent  # the first add(): no existing memory, so only the instructions differ
    assert seed_messages != rule_messages
    assert seeded.extract.rerender(seed_messages[-1]["content"], rewritten.extract.instruction) == rule_messages
    assert rewritten.extract.rerender(rule_messages[-1]["content"], seeded.extract.instruction) == seed_messages
    assert seeded.extract.rerender("Extract facts from: hello", rewritten.extract.instruction) is None  # not 2.x's
    reply = json.dumps({"memory": [{"id": "0", "text": "Theo adopted a dog"}]})
    assert seeded.extract.read_outputs(reply) == {"memories": ["Theo adopted a dog"]}
    assert seeded.extract.read_outputs(reply[:-3]) is None  # cut mid-JSON: Mem0 reads nothing


def test_without_the_library_the_system_names_the_install_command(monkeypatch, capsys):
    monkeypatch.setattr(_library, "installed_version", lambda: None)
    with pytest.raises(ConfigError, match=r"pip install 'memtrace-opt\[mem0ai\]'"):
        make_program("mem0ai")
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--system", "mem0ai", "--lm", "fake", "--no-judge", "-q", "--out", "unused"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "memtrace-opt[mem0ai]" in err


def test_a_prompt_past_the_models_context_is_an_op_error_that_says_the_fix(sample):
    from dspy.lm15 import ContextLengthError

    def too_long(call: FakeCall) -> dict:
        raise ContextLengthError("the prompt does not fit the context window", provider="fake")

    first = mem0_skills()[0]
    skills = [Skill((), too_long, name=first.name, when=first.when), *default_skills()]
    with dspy.context(lm=fake_lm(skills)):
        traced = trace_conversation(make_program("mem0ai"), sample, sample.questions[:1])
    failed = [f for f in traced.failures if f.op == "mem0ai.extract"]
    assert failed and all("n_ctx: 16384" in f.error for f in failed)
    assert traced.answers  # the run went on: each window's add() stored nothing


def test_the_extra_pins_the_tested_version_which_pulls_no_torch_and_the_base_install_has_no_mem0():
    from importlib.metadata import requires
    from pathlib import Path

    from memtrace_opt.programs.mem0ai._library import TESTED

    project = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    base = project.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert f'mem0ai = ["mem0ai=={TESTED[0]}"]' in project and "mem0" not in base
    needed = [r.split(";")[0].strip().lower() for r in requires("mem0ai") or [] if "extra ==" not in r]
    assert needed and not [r for r in needed if r.startswith(("torch", "fastembed", "spacy", "sentence"))]


def test_a_forced_repair_of_the_extraction_reaches_mem0_in_a_replay(sample):
    from memtrace_opt.tracing import replay

    lost = "Theo has a dog named Biscuit."
    with dspy.context(lm=fake_lm(planted_skills("mem0ai.extract", without("Biscuit")))):
        traced = trace_conversation(make_program("mem0ai"), sample, sample.questions[:1])
        graph = traced.graph()
        seq = next(a["seq"] for a in graph.nodes.values() if a.get("op") == "mem0ai.extract"
                   and "Biscuit" in a["inputs"]["messages"][1]["content"])
        outputs = graph.nodes[f"op:{seq}"]["outputs"]
        repaired = replay(make_program("mem0ai"), sample, sample.questions[:1], traced.events,
                          forced={seq: {"memories": [*outputs["memories"], lost]}})
    texts = [a["value"] for a in repaired.graph.nodes.values() if a.get("vtype") == "memory"]
    assert lost in texts and lost not in [a["value"] for a in graph.nodes.values() if a.get("vtype") == "memory"]
    assert repaired.graph.nodes[f"op:{seq}"]["replayed"] == "forced"
