from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console

from memtrace_opt.cli import doctor as doctor_module
from memtrace_opt.cli.doctor import run_doctor, split_fix
from memtrace_opt.estimate import RateStore, machine_id
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.testing import FakeEngine, FakeReply, Skill


def quiet() -> Console:
    return Console(record=True, width=200)


def test_fake_model_and_embedder_pass():
    engine = FakeEngine(skills=[Skill(("answer",), lambda c: {"answer": "Paris"})])
    report = run_doctor(ModelRoles(task=ModelSpec(model="fake")), quiet(), fake_engine=engine)
    assert [c.name for c in report.checks] == ["generation (dspy.Predict)", "speed (prompt reading, decoding)",
                                               "embedder (minilm)"]
    assert report.ok, report.checks
    assert "'Paris'" in report.checks[0].detail and "(1, 384)" in report.checks[2].detail
    assert "not stored (a fake model)" in report.checks[1].detail
    assert engine.calls[0].inputs == {"question": "What is the capital of France?"}
    assert report.timings["first_call_s"] >= 0 and "tokens_per_s" in report.timings


def test_unparseable_generation_fails_without_raising():
    def garbage(call):
        raise FakeReply("no fields here")

    report = run_doctor(ModelRoles(task=ModelSpec(model="fake")), quiet(),
                        fake_engine=FakeEngine(skills=[Skill(("answer",), garbage)]), check_embedder=False)
    (check,) = report.checks
    assert check.status == "FAILED" and "AdapterParseError" in check.detail
    assert not report.ok


def test_missing_parts_are_reported_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path))
    report = run_doctor(ModelRoles(), quiet(), finder=lambda module, index: None, check_embedder=False)
    names = [c.name for c in report.checks]
    assert names[:2] == ["llama_cpp importable", "model parts installed"]
    parts = report.checks[1]
    assert parts.status == "MISSING" and parts.fix == "pip install 'memtrace-opt[local]'"
    assert "generation (dspy.Predict)" not in names and not report.ok
    console = quiet()
    console.print(report.table())
    assert "MISSING" in console.export_text()


def test_missing_llama_cpp_is_reported_with_the_build_command(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    report = run_doctor(ModelRoles(), quiet(), check_embedder=False)
    first = report.checks[0]
    assert first.status == "MISSING" and first.fix.startswith('CMAKE_ARGS="-DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS=-U__AMX_INT8__ ')


def test_unknown_embedded_choice_fails_cleanly():
    report = run_doctor(ModelRoles(task=ModelSpec(model="embedded:13b")), quiet(), check_embedder=False)
    assert report.checks[0].status == "FAILED" and "unknown embedded model" in report.checks[0].detail


def test_litellm_errors_are_reported_not_raised(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MEMTRACE_ABSENT_KEY", raising=False)
    spec = ModelSpec(model="openai/gpt-4.1-mini", api_key_env="MEMTRACE_ABSENT_KEY")
    report = run_doctor(ModelRoles(task=spec), quiet(), check_embedder=False)
    assert report.checks[0].status == "FAILED" and "MEMTRACE_ABSENT_KEY is not set" in report.checks[0].detail


def test_split_fix():
    assert split_fix("x is missing; install it with: pip install y") == ("x is missing", "pip install y")
    assert split_fix("plain failure") == ("plain failure", "")


def test_command_exit_codes(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(typer.Exit) as ok:
        doctor_module.doctor(config=None, lm="fake", lm_api_base=None)
    assert ok.value.exit_code == 0
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(typer.Exit) as failed:
        doctor_module.doctor(config=None, lm="embedded", lm_api_base=None)
    assert failed.value.exit_code == 1


def test_speed_is_measured_at_about_the_models_rate(tmp_path: Path):
    """A model of a known speed (the slowed fake LM): the doctor measures about that speed (a fake model's rates are
    known to the estimates, so they are not stored)."""
    engine = FakeEngine(prompt_token_seconds=0.002, completion_token_seconds=0.01)
    store = RateStore(tmp_path / "rates.json")
    report = run_doctor(ModelRoles(task=ModelSpec(model="fake")), quiet(), fake_engine=engine, check_embedder=False,
                        rates=store)
    speed = report.checks[1]
    assert speed.ok and "reads " in speed.detail and "decodes " in speed.detail
    assert 250 <= report.timings["prompt_tps"] <= 500  # 500 tokens/s less the call's own overhead
    assert 60 <= report.timings["decode_tps"] <= 140  # 100 tokens/s
    assert report.timings["tokens_per_word"] == pytest.approx(1.0, abs=0.05)
    assert store.get("fake", machine_id()) is None  # a fake model's rates are never stored


def test_rates_are_stored_by_machine_and_model(tmp_path: Path):
    from memtrace_opt.estimate import Rates

    store = RateStore(tmp_path / "cache" / "rates.json")
    assert store.get("embedded") is None  # no file: no rates
    rates = Rates(152.0, 21.5, 1.31, model="embedded n_batch=256", machine=machine_id(), source="doctor")
    store.put(rates)
    store.put(Rates(40.0, 9.0, 1.3, model="embedded", machine="another machine"))
    assert store.get("embedded n_batch=256") == Rates.from_dict(rates.to_dict())
    assert store.get("embedded") is None and store.get("embedded", "another machine").prompt_tps == 40.0
    (tmp_path / "cache" / "rates.json").write_text("{not json", encoding="utf-8")
    assert store.get("embedded n_batch=256") is None  # unreadable: none, never an error
