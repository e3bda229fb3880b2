"""The check before a job: each role's model answers one short, uncached call (the embedded model too), counted
in no job's usage; a model that cannot answer is a ModelUnavailable naming the role and the model."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from runfixtures import write_conversations

from memtrace_opt.cli import run_cli
from memtrace_opt.errors import ModelUnavailable
from memtrace_opt.lm.embedded import EmbeddedEngine, LoadedModel
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import (
    PING,
    PING_MAX_TOKENS,
    ROLES,
    ModelRoles,
    ModelSpec,
    check_model,
    check_roles,
)
from memtrace_opt.testing.openai_server import FakeOpenAIServer


def test_a_served_model_answers_one_uncached_short_call_each_time() -> None:
    with FakeOpenAIServer() as server:
        spec = ModelSpec("openai/fake", api_base=server.api_base, max_tokens=512)
        check_model(spec, "judge")
        check_model(spec, "judge")  # DSPy's cache is off for the check: the second is a real call too
    assert len(server.requests) == 2
    first = server.requests[0]
    assert first["messages"] == [{"role": "user", "content": PING}]
    assert (first.get("max_completion_tokens") or first.get("max_tokens")) == PING_MAX_TOKENS


def test_roles_sharing_a_spec_are_checked_once_and_others_each() -> None:
    with FakeOpenAIServer() as server:
        task = ModelSpec("openai/fake", api_base=server.api_base)
        check_roles(ModelRoles(task=task), ROLES)
        assert len(server.requests) == 1
        check_roles(ModelRoles(task=task, judge=ModelSpec("openai/other", api_base=server.api_base)), ROLES)
        assert [r["model"] for r in server.requests[1:]] == ["fake", "other"]


def test_the_check_counts_in_no_usage_of_the_job() -> None:
    with FakeOpenAIServer() as server:
        roles = ModelRoles(task=ModelSpec("openai/fake", api_base=server.api_base, extra={"cache": False}))
        models = Models.from_roles(roles)
        check_roles(roles)
        models.task("A question of the job.")
    assert len(server.requests) == 2  # the server saw the check and the job's call; the job's usage only its own
    assert models.usage.to_dict()["task"]["calls"] == 1


def test_an_optimize_over_http_spends_no_budget_on_the_check(tmp_path: Path) -> None:
    data = write_conversations(tmp_path / "three.json")
    (tmp_path / "run.yaml").write_text("settings: {embedder: hash}\n")
    with FakeOpenAIServer() as server:
        assert run_cli(["optimize", "--system", "rag", "--data", str(data), "--lm", "openai/fake", "--lm-api-base",
                        server.api_base, "--preset", "quick", "--config", str(tmp_path / "run.yaml"),
                        "--out", str(tmp_path / "opt")]) == 0
    asked = [r["messages"][-1]["content"] for r in server.requests]
    assert asked[0] == PING and asked.count(PING) == 1  # one check (every role shares the task's model), first
    manifest = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    live = sum(u["calls"] - u["cache_hits"] for u in manifest["usage"].values())
    assert live == len(asked) - 1 > 0  # the server saw the check; the usage, and so the budget, did not


def test_a_dead_server_names_the_role_model_and_address(closed_api_base: str) -> None:
    spec = ModelSpec("openai/x", api_base=closed_api_base)
    with pytest.raises(ModelUnavailable) as info:
        check_roles(ModelRoles(task=ModelSpec("fake"), reflection=spec), ("task", "reflection"))
    message = str(info.value)
    assert message.startswith(f"reflection model openai/x at {closed_api_base} did not answer a test call: ")
    assert "\n" not in message


def test_the_fake_model_passes_without_a_call() -> None:
    check_roles(ModelRoles(task=ModelSpec("fake"), judge=ModelSpec("fake/judge")), ROLES)  # returns, raises nothing


class _Llama:
    """Stands in for llama.cpp: counts chat completions, or fails each."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[dict[str, Any]] = []

    def create_chat_completion(self, messages: list[dict[str, str]], **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"messages": messages, **kwargs})
        if self.error is not None:
            raise self.error
        return {"choices": [{"message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 1, "total_tokens": 13}}


def _embedded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llama: _Llama) -> ModelSpec:
    path = tmp_path / "stub.gguf"
    loaded = LoadedModel(llama, threading.Lock(), path, 8192)
    monkeypatch.setattr(EmbeddedEngine, "prepare", lambda self, progress=None: path)
    monkeypatch.setattr(EmbeddedEngine, "loaded", lambda self: loaded)
    return ModelSpec(f"embedded:{path}", extra={"grammar": False})


def test_the_embedded_model_is_asked_a_few_tokens_each_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    llama = _Llama()
    spec = _embedded(monkeypatch, tmp_path, llama)
    check_model(spec, "attributor")
    check_model(spec, "attributor")  # uncached: the embedded model caches its replies in DSPy's cache otherwise
    assert len(llama.calls) == 2
    assert llama.calls[0]["messages"][-1] == {"role": "user", "content": PING}
    assert llama.calls[0]["max_tokens"] == PING_MAX_TOKENS


def test_an_embedded_model_that_fails_names_the_role(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = _embedded(monkeypatch, tmp_path, _Llama(RuntimeError("llama_decode returned -3")))
    with pytest.raises(ModelUnavailable, match=r"^task model embedded:.*stub\.gguf did not answer a test call: "
                                               r".*llama_decode returned -3"):
        check_model(spec, "task")


@pytest.mark.embedded
def test_the_check_generates_with_the_real_embedded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    replies: list[Any] = []
    complete = EmbeddedEngine.complete

    def counted(self: EmbeddedEngine, request: Any) -> Any:
        replies.append(complete(self, request))
        return replies[-1]

    monkeypatch.setattr(EmbeddedEngine, "complete", counted)
    check_model(ModelSpec("embedded"), "task")
    (reply,) = replies
    assert 0 < (reply.usage.output_tokens or 0) <= PING_MAX_TOKENS
