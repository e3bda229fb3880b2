"""`memtrace optimize --system mem0ai`: the loop rewrites only what Mem0 lets a user set, scores a candidate on
Mem0's recorded extraction calls re-rendered under it, and writes the Mem0 configuration beside program.json; Mem0
accepts that configuration and uses it on the next run."""

from __future__ import annotations

import json

import dspy
import pytest
from optfixtures import FIX, make_models
from required import need_mem0ai
from toydata import write_locomo

from memtrace_opt.data import load_data
from memtrace_opt.optimizers import LoopSettings, load_optimized
from memtrace_opt.optimizers.optimize import OptimizeRequest, optimize_system
from memtrace_opt.testing import FakeEngine, fake_lm
from memtrace_opt.testing.skills import default_skills
from memtrace_opt.tracing import trace_conversation

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_optimize_writes_a_mem0_configuration_the_library_takes_and_uses(tmp_path):
    need_mem0ai("2.")
    from memtrace_opt.programs.mem0ai._library import import_mem0, offline_config

    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))  # toy-c: the same conversation as toy-a, to validate on
    models, _ = make_models()
    out = tmp_path / "opt"
    request = OptimizeRequest(system="mem0ai", data=str(data), out=out, train="toy-a", val="toy-c", test="toy-b",
                              settings=LoopSettings.of(rounds=1, candidates=1, minibatch=5, repairs=0),
                              attribution="lineage")
    summary = optimize_system(request, models=models)
    assert summary.best_val > summary.baseline_val  # the custom instructions about dates fixed the dated facts
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["instructions"]["after"]) == {"extract.predict", "answer.predict"}
    first = manifest["rounds"][0]
    assert first["chosen_predictor"] == "extract.predict"
    # Mem0 builds the prompt, yet the recorded extraction calls were re-run under the candidate (re-rendered)
    assert first["local_set"]["calls"] > 0
    scored = [c for c in first["candidates"] if c.get("local")]
    assert scored and scored[0]["local"]["lm_calls"] > 0 and scored[0]["local"]["fixed"] > scored[0]["local"]["lost"]
    written = json.loads((out / "mem0_config.json").read_text())
    assert written == {"custom_instructions": FIX.strip()}  # only what Mem0 lets a user set

    memory = import_mem0().Memory.from_config({**offline_config(384), **written})  # the library accepts it ...
    assert memory.custom_instructions == FIX.strip()
    assert json.loads((out / "program.json").read_text())["memtrace"]["system"] == "mem0ai"
    program = load_optimized(out)  # ... and the next run of the saved program puts it in Mem0's prompt
    assert program.mem0_config() == written
    engine = FakeEngine(skills=default_skills())
    conversation = load_data(f"{data}:toy-b").conversations[0]
    with dspy.context(lm=fake_lm(engine=engine)):
        trace_conversation(program, conversation, conversation.questions[:1])
    prompts = [c.messages[-1]["content"] for c in engine.calls if "Memory Extractor" in c.messages[0]["content"]]
    assert prompts and all(f"## Custom Instructions\n{FIX.strip()}" in p for p in prompts)
