"""The time estimate's parts: the dry run's counts, costs at given rates, the rates a job finds, and the
optimizer's and compare's estimates capped by their budgets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memtrace_opt.data import DataSlice, load_data
from memtrace_opt.estimate import (
    CallCost,
    Cost,
    Rates,
    RateStore,
    count_work,
    job_rates,
    known_rates,
    machine_id,
    model_key,
    run_estimate,
)
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.optimizers.comparison.estimate import compare_estimate, optimize_estimate, split_work
from memtrace_opt.optimizers.evaluation.examples import case_refs, evaluation_steps, make_examples
from memtrace_opt.optimizers.evaluation.splits import make_splits
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.programs import make_program
from memtrace_opt.testing import FakeEngine

RATES = Rates(100.0, 10.0, 1.5, model="m", machine="x")


@pytest.fixture(scope="module")
def sample():
    return load_data("sample", DataSlice())


def test_a_calls_cost_reads_its_prompt_and_decodes_its_capped_reply():
    assert RATES.call_seconds(200, 40, None) == pytest.approx(300 / 100 + 60 / 10)
    assert RATES.call_seconds(200, 40, 16) == pytest.approx(3.0 + 16 / 10)  # the reply cap binds
    cost = Cost.of([CallCost("answer", 200, 40, 16), CallCost("answer", 100, 2, 16)], RATES)
    assert (cost.calls, cost.prompt_tokens, cost.completion_tokens) == (2, 450, 19)
    assert (cost * 2).seconds == pytest.approx(2 * cost.seconds) and (cost + cost).calls == 4


def test_the_dry_run_counts_the_write_path_every_answer_and_the_judge(sample):
    work = count_work(make_program("mem0", {"embedder": "hash"}), list(sample.conversations), judge=True,
                      reply_cap=512)
    (conversation,) = work.conversations.values()
    questions = sample.conversations[0].questions
    assert conversation.sessions == 3 and conversation.write  # mem0 extracts and decides per session
    assert {c.operation for c in conversation.write} == {"facts", "memory_actions"}
    assert set(conversation.answers) == {q.question_id for q in questions}
    assert all(c.operation == "answer" and c.reply_cap == 64 for c in conversation.read())  # the answer op's cap
    judged = {q.question_id for q in questions if not q.abstention}
    assert set(conversation.judged) == judged and all(len(calls) == 1 for calls in conversation.judged.values())
    assert all(c.prompt_words > 50 and c.reply_words > 0 for c in conversation.read())


def test_a_run_estimate_has_a_part_per_step(sample):
    work = count_work(make_program("rag", {"embedder": "hash"}), list(sample.conversations), judge=False)
    estimate = run_estimate(work, list(sample.conversations), judge=False, rates=RATES)
    assert list(estimate.parts) == ["memorize", "answer"] and estimate.parts["memorize"] == 0  # rag: no LM writes
    assert estimate.lm_calls == 13 and estimate.seconds == pytest.approx(sum(estimate.parts.values()))
    record = estimate.to_dict()
    assert record["rates"]["prompt_tps"] == 100.0 and record["lm_calls"] == 13
    assert "estimate: about " in estimate.text() and "reads 100 tokens/s, decodes 10 tokens/s" in estimate.text()


def test_a_fake_lms_rates_are_its_set_speed():
    slow = Models(ModelRoles(task=ModelSpec(model="fake")),
                  fake_engine=FakeEngine(prompt_token_seconds=0.01, completion_token_seconds=0.1))
    rates = known_rates(slow.task)
    assert rates is not None and (rates.prompt_tps, rates.decode_tps) == pytest.approx((100.0, 10.0))
    instant = known_rates(Models(ModelRoles(task=ModelSpec(model="fake"))).task)
    assert instant is not None and math.isinf(instant.prompt_tps) and instant.to_dict()["prompt_tps"] is None


def test_a_job_reads_the_stored_rates_of_its_machine_and_model(tmp_path: Path):
    spec = ModelSpec(model="openai/served", api_base="http://127.0.0.1:9/v1", extra={"n_batch": 256})
    store = RateStore(tmp_path / "rates.json")
    assert model_key(spec) == "openai/served @http://127.0.0.1:9/v1 n_batch=256"
    models = Models(ModelRoles(task=spec))
    assert job_rates(models, store=store)[0] is None
    store.put(Rates(60.0, 12.0, 1.4, model=model_key(spec), machine=machine_id()))
    rates, why = job_rates(models, store=store)
    assert rates is not None and rates.prompt_tps == 60.0 and why == ""


def test_the_embedded_model_is_measured_at_the_start_when_no_rates_are_stored(tmp_path: Path, monkeypatch):
    import memtrace_opt.estimate._jobs as jobs

    measured = Rates(150.0, 20.0, 1.5, model="embedded", machine=machine_id(), source="start")
    monkeypatch.setattr(jobs, "_measuring_lm", lambda spec: object())
    monkeypatch.setattr(jobs, "measure_rates", lambda lm, model, source: measured)

    class EmbeddedModels:  # the job's models: an embedded task model (never loaded here)
        roles = ModelRoles(task=ModelSpec(model="embedded"))
        task = object()

    store = RateStore(tmp_path / "rates.json")
    assert job_rates(EmbeddedModels(), store=store) == (measured, "")
    assert store.get("embedded") == Rates.from_dict(measured.to_dict())  # kept for the next job


def test_reply_lengths_learned_in_jobs_price_the_calls_of_their_shape(tmp_path: Path):
    store = RateStore(tmp_path / "rates.json")
    assert not store.learn("m", {"raw": (2, 3000)})  # no rates stored for the model: nothing to keep them beside
    store.put(Rates(100.0, 10.0, 1.5, model="m", machine=machine_id()))
    assert store.learn("m", {"raw": (2, 3000), "answer": (4, 40)})
    assert store.learn("m", {"raw": (1, 600)})
    rates = store.get("m")
    assert rates is not None and rates.replies == {"raw": [3, 1200.0], "answer": [4, 10.0]}
    assert rates.tokens(100, 20, 2000, "raw") == (150, 1200.0)  # the measured length, not the scripted 20 words
    assert rates.tokens(100, 20, 800, "raw") == (150, 800)  # still capped by the call's reply limit
    assert rates.tokens(100, 20, None, "facts") == (150, 30)  # a shape never measured: the scripted reply
    store.put(Rates(120.0, 12.0, 1.5, model="m", machine=machine_id()))  # measured again by doctor
    kept = store.get("m")
    assert kept is not None and kept.prompt_tps == 120.0 and kept.replies == rates.replies


def test_a_run_keeps_how_long_the_models_replies_were_for_the_next_estimate(sample, tmp_path: Path, monkeypatch):
    from memtrace_opt.runner import RunRequest, run_system
    from memtrace_opt.testing import Skill
    from memtrace_opt.testing.skills import default_skills

    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path / "cache"))
    long_answer = " ".join(["word"] * 40)
    engine = FakeEngine(skills=[Skill(("answer",), lambda call: {"answer": long_answer}, name="long"),
                                *default_skills()])
    models = Models(ModelRoles(task=ModelSpec(model="fake")), fake_engine=engine)
    RateStore().put(Rates(100.0, 10.0, 1.0, model=model_key(ModelSpec(model="fake")), machine=machine_id()))
    program = make_program("rag", {"embedder": "hash"})
    before = Cost.of(count_work(program, list(sample.conversations)).read(list(sample.conversations)),
                     RateStore().get("fake") or RATES)
    run_system(RunRequest(system="rag", data="sample", out=tmp_path / "run", judge=False,
                          program_settings={"embedder": "hash"}), progress=False, models=models)
    learned = RateStore().get("fake")
    assert learned is not None and learned.replies["answer"][0] == before.calls  # every answer, live
    after = Cost.of(count_work(program, list(sample.conversations)).read(list(sample.conversations)), learned)
    assert learned.replies["answer"][1] > 40 and after.completion_tokens > before.completion_tokens


def test_a_comparison_keeps_its_warm_ups_reply_lengths_before_its_first_row(tmp_path: Path, monkeypatch):
    from memtrace_opt.optimizers.comparison import compare
    from memtrace_opt.optimizers.comparison.compare import CompareRequest, compare_optimizers

    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path / "cache"))
    RateStore().put(Rates(100.0, 10.0, 1.0, model=model_key(ModelSpec(model="fake")), machine=machine_id()))

    def cut(*args, **kwargs):
        raise KeyboardInterrupt  # the sitting ends as the first row starts

    monkeypatch.setattr(compare, "_row", cut)
    request = CompareRequest(system="rag", data="sample", out=tmp_path / "cmp", split="0.4,0.3,0.3",
                             optimizers=("bootstrap",), budget=10, program_settings={"embedder": "hash"})
    with pytest.raises(KeyboardInterrupt):
        compare_optimizers(request, models=Models(ModelRoles(task=ModelSpec(model="fake"))))
    learned = RateStore().get("fake")
    assert learned is not None and learned.replies.get("answer", [0])[0] > 0


def _splits(sample, split: str = "0.4,0.3,0.3"):
    return make_splits(sample, train=None, val=None, test=None, split=split, per_split=None, seed=0)


def test_the_optimizers_rounds_are_capped_by_its_budgets(sample):
    splits = _splits(sample)
    work = split_work(make_program("rag", {"embedder": "hash"}), splits, judge=False, reply_cap=256)
    free = optimize_estimate(work, splits, LoopSettings.of(rounds=2), RATES, judge=False, attribution="lineage",
                             reply_cap=256)
    assert list(free.parts) == ["baseline", "rounds", "held-out test"] and free.parts["rounds"] > 0
    by_calls = optimize_estimate(work, splits, LoopSettings.of(rounds=2, budget=10), RATES, judge=False,
                                 attribution="lineage", reply_cap=256)
    by_time = optimize_estimate(work, splits, LoopSettings.of(rounds=2, time_budget=free.parts["baseline"] + 5),
                                RATES, judge=False, attribution="lineage", reply_cap=256)
    assert by_calls.parts["rounds"] < free.parts["rounds"]
    assert by_time.parts["rounds"] == pytest.approx(5.0)  # the time budget counts the baseline too
    lm_method = optimize_estimate(work, splits, LoopSettings.of(rounds=2), RATES, judge=False,
                                  attribution="graphtrace", reply_cap=256)
    assert lm_method.parts["rounds"] > free.parts["rounds"]  # an LM attribution method costs calls


def test_compare_costs_the_warm_up_and_each_optimizer_at_its_budget(sample):
    splits = _splits(sample)
    work = split_work(make_program("rag", {"embedder": "hash"}), splits, judge=False, reply_cap=256)
    estimate = compare_estimate(work, splits, ["memtrace", "gepa"], RATES, budget=20, time_budget=None, judge=False)
    assert list(estimate.parts) == ["warm-up", "memtrace", "gepa"]
    assert estimate.parts["memtrace"] == estimate.parts["gepa"] > 0
    everything = [*splits.train, *splits.val, *splits.test]
    answered = Cost.of([*work.write(list(work.conversations)), *work.read(everything)], RATES)
    assert estimate.parts["warm-up"] == pytest.approx(answered.seconds)  # train and validation answered too
    capped = compare_estimate(work, splits, ["memtrace"], RATES, budget=20, time_budget=1.0, judge=False)
    assert capped.parts["memtrace"] < estimate.parts["memtrace"]


def test_evaluation_steps_count_each_conversations_sessions_and_each_question(sample):
    cases = case_refs(make_examples(list(sample.conversations)))
    assert evaluation_steps(cases) == 3 + len(cases)


def test_optimize_and_compare_say_why_a_failed_dry_run_leaves_no_estimate_alike(sample, monkeypatch, caplog):
    from memtrace_opt.optimizers import optimize
    from memtrace_opt.optimizers.comparison import compare
    from memtrace_opt.optimizers.comparison import estimate as split_estimates

    def fails(*args, **kwargs):
        raise RuntimeError("the program cannot be dry-run")

    monkeypatch.setattr(split_estimates, "split_work", fails)
    models, splits, student = Models(ModelRoles(task=ModelSpec(model="fake"))), _splits(sample), object()
    said = [optimize._estimate(optimize.OptimizeRequest(system="rag", data="sample", out=Path("o")), student,
                               models, splits),
            compare._estimate(compare.CompareRequest(system="rag", data="sample", out=Path("c")), student, models,
                              splits, ["memtrace"])]
    why = "no estimate: the dry run failed (RuntimeError: the program cannot be dry-run)"
    assert said == [{"seconds": None, "why": why}] * 2
    assert sum("the program cannot be dry-run" in r.getMessage() for r in caplog.records) == 2  # each logs it
