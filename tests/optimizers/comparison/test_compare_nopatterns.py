"""The `memtrace_nopatterns` row of `memtrace compare`: our loop without the diagnosis (no pattern rule among the
candidates, no diagnosed mistake told the reflection LM), run end to end beside `memtrace`."""

from __future__ import annotations

from toydata import write_locomo

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers import LoopSettings
from memtrace_opt.optimizers.comparison.compare import OURS, CompareRequest, compare_optimizers
from memtrace_opt.testing import FakeEngine, Skill
from memtrace_opt.testing.skills import answer, default_skills

NOT_FOUND = "(nothing common found"


def models_seeing(mistakes: list[str]) -> Models:
    """Fake models whose reflection LM echoes the current instruction (recording the mistake it is told), and
    whose answerer gives a relative time to a "When" question unless its instruction rules that out."""

    def echo(field: str):
        def reply(call):
            mistakes.append(call.inputs["mistake"])
            return {field: call.inputs["current_instruction"]}
        return reply

    def vague_dates(call):
        if call.inputs.get("question", "").startswith("When") and "never a relative time" not in call.instruction:
            return {"answer": "a while ago"}
        return answer(call)

    engine = FakeEngine(skills=[Skill(("rules",), echo("rules")), Skill(("new_instruction",), echo("new_instruction")),
                                Skill(("answer",), vague_dates, name="answer"), *default_skills()])
    return Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)


def test_the_nopatterns_row_runs_our_loop_without_the_diagnosis(tmp_path):
    assert "memtrace_nopatterns" in OURS
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    rows, told = {}, {}
    for name in ("memtrace", "memtrace_nopatterns"):
        mistakes: list[str] = []
        request = CompareRequest(system="long_context", data=str(data), out=tmp_path / name, train="toy-a",
                                 val="toy-b", test="toy-c", optimizers=(name,), budget=80, attribution="lineage",
                                 loop=LoopSettings.of(candidates=2, minibatch=9, rounds=2, repairs=0, demos=0))
        (rows[name],) = compare_optimizers(request, models=models_seeing(mistakes)).rows
        told[name] = mistakes
    for row in rows.values():
        assert row.error is None and row.details["rounds"]
    origins = {name: [c["origin"] for r in row.details["rounds"] for c in r["candidates"]]
               for name, row in rows.items()}
    # with the diagnosis the learned date rule (the toy golds' "12 March 2034" form) is a candidate and fixes the
    # "When" questions; without it no candidate is a pattern's rule, and the reflection LM is told no mistake
    assert "pattern:date_form" in origins["memtrace"]
    assert rows["memtrace"].optimized_accuracy > rows["memtrace"].baseline_accuracy
    assert any("relative time" in m for m in told["memtrace"])
    assert not any(origin.startswith("pattern:") for origin in origins["memtrace_nopatterns"])
    assert told["memtrace_nopatterns"] and all(m.startswith(NOT_FOUND) for m in told["memtrace_nopatterns"])
    assert rows["memtrace_nopatterns"].optimized_accuracy == rows["memtrace_nopatterns"].baseline_accuracy
    assert (tmp_path / "memtrace_nopatterns" / "programs" / "memtrace_nopatterns.json").is_file()
