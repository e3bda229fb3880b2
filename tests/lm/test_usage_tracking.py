from __future__ import annotations

import copy
import threading

import dspy
import pytest
from dspy.clients.cache import Cache
from rich.console import Console

from memtrace_opt.lm import ModelRoles, Models, ModelSpec, RoleUsage, UsageTracker, usage_table
from memtrace_opt.testing import FakeEngine, FakeTimeout, Skill


def fake_models(engine: FakeEngine | None = None) -> Models:
    roles = ModelRoles(task=ModelSpec(model="fake"), judge=ModelSpec(model="fake"))
    return Models.from_roles(roles, fake_engine=engine or FakeEngine())


def ask(lm: dspy.LM, question: str) -> str:
    with dspy.context(lm=lm):
        return dspy.Predict("question -> answer")(question=question).answer


def test_models_are_lazy_distinct_per_role_and_share_usage():
    models = fake_models()
    assert models.usage.snapshot() == {}
    assert models.task is models.task
    assert models.task is not models.reflection
    assert {models.task.role, models.judge.role, models.reflection.role, models.attributor.role} == {
        "task", "judge", "reflection", "attributor"}
    assert models.names()["attributor"] == "fake"


def test_calls_and_tokens_are_counted_per_role():
    engine = FakeEngine(skills=[Skill(("answer",), lambda c: {"answer": "a b c"})])
    models = fake_models(engine)
    for q in ("one", "two", "three"):
        ask(models.task, q)
    ask(models.judge, "judge this")
    usage = models.usage.snapshot()
    assert usage["task"].calls == 3 and usage["judge"].calls == 1
    expected_prompt = sum(len(m["content"].split()) for c in engine.calls[:3] for m in c.messages)
    assert usage["task"].prompt_tokens == expected_prompt
    assert usage["task"].completion_tokens == 3 * len("[[ ## answer ## ]]\na b c\n\n[[ ## completed ## ]]".split())
    assert usage["task"].seconds > 0 and usage["task"].failures == 0 and usage["task"].cache_hits == 0


def test_counts_are_exact_across_threads():
    models = fake_models()

    def work(i: int) -> None:
        for j in range(5):
            ask(models.task if i % 2 else models.judge, f"{i}-{j}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    usage = models.usage.snapshot()
    assert usage["task"].calls == 20 and usage["judge"].calls == 20
    assert usage["task"].prompt_tokens > 0


def test_dspy_parallel_calls_are_counted():
    models = fake_models()
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=models.task):
        dspy.Parallel(num_threads=4)([(predict, {"question": f"q{i}"}) for i in range(12)])
    assert models.usage.snapshot()["task"].calls == 12


def test_failures_are_counted():
    def timeout(call):
        raise FakeTimeout()

    models = fake_models(FakeEngine(skills=[Skill(("answer",), timeout)]))
    with pytest.raises(Exception, match="timed out"):
        ask(models.task, "q")
    assert models.usage.snapshot()["task"] == RoleUsage(calls=1, seconds=models.usage.snapshot()["task"].seconds,
                                                        failures=1)


def test_cache_hits_are_counted_and_carry_no_tokens(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True,
                                             disk_cache_dir="", disk_size_limit_bytes=0), raising=False)
    roles = ModelRoles(task=ModelSpec(model="fake/cache-test", extra={"cache": True}))
    models = Models.from_roles(roles, fake_engine=FakeEngine())
    ask(models.task, "same")
    ask(models.task, "same")
    usage = models.usage.snapshot()["task"]
    assert usage.calls == 2 and usage.cache_hits == 1
    first_call_tokens = usage.prompt_tokens
    ask(models.task, "same")
    assert models.usage.snapshot()["task"].prompt_tokens == first_call_tokens


def test_a_users_track_usage_still_sees_the_calls():
    models = fake_models()
    with dspy.track_usage() as tracker:
        ask(models.task, "q")
    assert tracker.get_total_tokens()["fake/task"]["prompt_tokens"] > 0


def test_copies_share_the_tracker():
    models = fake_models()
    lm = models.task
    ask(lm.copy(temperature=0.5), "q")
    ask(copy.deepcopy(lm), "q")
    assert models.usage.snapshot()["task"].calls == 2


def test_to_dict_and_table():
    tracker = UsageTracker()
    tracker.record("task", prompt_tokens=10, completion_tokens=2, seconds=0.5)
    tracker.record("judge", cached=True)
    assert tracker.to_dict()["task"] == {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "seconds": 0.5,
                                         "cache_hits": 0, "failures": 0}
    assert RoleUsage.from_dict(tracker.to_dict()["judge"]).cache_hits == 1
    console = Console(record=True, width=120)
    console.print(usage_table(tracker.snapshot()))
    text = console.export_text()
    assert "task" in text and "judge" in text and "total" in text
