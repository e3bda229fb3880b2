"""`memtrace serve-model` without the model: the served model is loaded and sampled as the in-process engine,
requests leaving a sampling parameter out get the engine's value, and bad options fail in one line."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest
from required import need_module

from memtrace_opt.errors import ConfigError, ModelUnavailable
from memtrace_opt.lm import embedded
from memtrace_opt.lm.serve import (
    ENGINE_REQUEST_DEFAULTS,
    EngineDefaults,
    ServeOptions,
    model_settings,
    require_server,
)

llama_cpp = need_module("llama_cpp", "pip install -e '.[local]'")
need_module("pydantic_settings", "pip install -e '.[serve]'")

# what llama-cpp-python's server hands llama_cpp.Llama from its ModelSettings (llama_cpp/server/model.py)
SERVER_PASSES = ("n_gpu_layers", "split_mode", "main_gpu", "tensor_split", "vocab_only", "use_mmap", "use_mlock",
                 "seed", "n_ctx", "n_batch", "n_ubatch", "n_threads", "n_threads_batch", "rope_scaling_type",
                 "rope_freq_base", "rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast",
                 "yarn_beta_slow", "yarn_orig_ctx", "logits_all", "embedding", "offload_kqv", "flash_attn",
                 "last_n_tokens_size", "lora_base", "lora_path", "numa", "chat_format", "type_k", "type_v",
                 "verbose")


def _in_process_kwargs(monkeypatch, path: Path, **levers) -> dict:
    """The keyword arguments `embedded.load_model` gives llama_cpp.Llama, captured without loading anything."""
    seen: dict = {}
    monkeypatch.setattr(embedded, "_LOADED", {})
    monkeypatch.setattr(embedded, "_new_llama", lambda **kwargs: seen.update(kwargs) or object())
    embedded.load_model(path, 4096, levers=embedded.EngineLevers(**levers))
    return seen


@pytest.mark.parametrize("levers", [{}, {"n_threads": 3, "n_threads_batch": 2, "n_batch": 256, "flash_attn": True}])
def test_the_served_model_loads_as_the_in_process_engine_loads_it(monkeypatch, tmp_path, levers):
    path = tmp_path / "model.gguf"
    in_process = _in_process_kwargs(monkeypatch, path, **levers)
    settings = model_settings(ServeOptions(n_ctx=4096, name="qwen", **levers), path)
    llama_defaults = {name: p.default for name, p in inspect.signature(llama_cpp.Llama.__init__).parameters.items()}

    assert settings.model == in_process["model_path"] == str(path) and settings.model_alias == "qwen"
    differences = {}
    for name in SERVER_PASSES:
        expected = in_process.get(name, llama_defaults.get(name))
        if getattr(settings, name) != expected:
            differences[name] = (getattr(settings, name), expected)
    assert differences == {}
    assert settings.cache is False  # the levers-off engine keeps only the previous call's prefix, as the server does


def test_a_request_leaving_sampling_out_gets_the_in_process_values():
    from starlette.testclient import TestClient

    received: list[tuple[str, bytes, str]] = []

    async def echo(scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        length = dict(scope["headers"]).get(b"content-length", b"").decode()
        received.append((scope["path"], body, length))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    client = TestClient(EngineDefaults(echo))
    client.post("/v1/chat/completions", json={"model": "qwen", "messages": [], "temperature": 0.7})
    client.post("/v1/completions", json={"prompt": "x", "repeat_penalty": None})
    client.post("/v1/chat/completions", content=b"not json")
    client.post("/v1/chat/completions", json={"messages": [], "max_completion_tokens": 64})
    client.post("/extras/tokenize", json={"input": "x"})

    chat, text, broken, newer, other = received
    sent = json.loads(chat[1])
    assert sent["temperature"] == 0.7  # what the client asked for stays
    assert {k: sent[k] for k in ("max_tokens", "seed", "repeat_penalty")} == {
        k: ENGINE_REQUEST_DEFAULTS[k] for k in ("max_tokens", "seed", "repeat_penalty")}
    assert chat[2] == str(len(chat[1]))  # the length header follows the new body
    assert json.loads(text[1])["repeat_penalty"] == 1.0 and json.loads(text[1])["temperature"] == 0.0
    assert broken[1] == b"not json"  # left for the server to refuse
    assert json.loads(newer[1])["max_tokens"] == 64  # DSPy's max_completion_tokens, which the server ignores
    assert json.loads(other[1]) == {"input": "x"}


def test_options_name_the_served_model_and_refuse_bad_values():
    options = ServeOptions(port=8123)
    assert options.served_name() == embedded.parse_choice("embedded").tag
    assert options.api_base == "http://127.0.0.1:8123/v1"
    assert ServeOptions(host="::1").api_base == "http://[::1]:8000/v1"
    for bad, words in [({"model": "openai/gpt-4.1-mini"}, "serves an embedded model"), ({"port": 0}, "--port"),
                       ({"n_ctx": 100}, "--n-ctx"), ({"name": " "}, "--name")]:
        with pytest.raises(ConfigError, match=words):
            ServeOptions(**bad)


def test_a_missing_server_extra_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp.server.app", None)
    with pytest.raises(ModelUnavailable, match=r"memtrace-opt\[serve\]"):
        require_server()


def test_the_command_refuses_a_model_it_cannot_serve_in_one_line(capsys):
    from memtrace_opt.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["serve-model", "--model", "openai/gpt-4.1-mini"])
    assert exit_info.value.code == ConfigError("x").exit_code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: serve-model serves an embedded model") and "\n" not in err


def test_the_ready_line_gives_the_flags_that_use_the_server():
    from memtrace_opt.cli.serve_model_cmd import ready_line

    line = ready_line(ServeOptions(port=8123, name="qwen"))
    assert "--lm openai/qwen --lm-api-base http://127.0.0.1:8123/v1" in line


class StubLlama:
    """Stands in for the llama_cpp.Llama the server would load: records each call, answers like it."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "qwen",
                "choices": [{"index": 0, "logprobs": None, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]"}}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36}}


def test_a_role_runs_through_litellm_against_the_served_app(monkeypatch, tmp_path):
    """The whole path but the weights: dspy.LM -> HTTP -> EngineDefaults -> llama-cpp-python's server -> Llama."""
    import socket
    import threading
    import time

    import dspy

    need_module("llama_cpp.server.app", "pip install -e '.[serve]' (llama-cpp-python's server extra)")
    from llama_cpp.server.model import LlamaProxy

    from memtrace_opt.lm.roles import ModelSpec, build_lm
    from memtrace_opt.lm.serve import build_app, http_server

    stub = StubLlama()
    loaded: list = []
    monkeypatch.setattr(LlamaProxy, "load_llama_from_model_settings",
                        staticmethod(lambda settings: loaded.append(settings) or stub))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "model.gguf"
    options = ServeOptions(model=f"embedded:{path}", port=port, name="qwen")
    server = http_server(options, build_app(options, path))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        lm = build_lm(ModelSpec(model="openai/qwen", api_base=options.api_base, max_tokens=64, extra={"cache": False}))
        with dspy.context(lm=lm):
            assert dspy.Predict("question -> answer")(question="Capital of France?").answer == "Paris"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    [settings] = loaded
    assert settings.model == str(path) and settings.model_alias == "qwen" and settings.seed == embedded.SEED
    [call] = stub.calls
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    assert call["messages"][1]["content"].startswith("[[ ## question ## ]]\nCapital of France?")
    assert (call["temperature"], call["max_tokens"], call["seed"], call["repeat_penalty"]) == (0.0, 64, 0, 1.0)
    assert lm.usage.snapshot()["task"].prompt_tokens == 30


def test_the_server_imports_llama_cpp_as_the_engine_does(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    need_module("llama_cpp.server.app", "pip install -e '.[serve]' (llama-cpp-python's server extra)")
    require_server()
    assert embedded.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # idle OpenMP threads do not spin
