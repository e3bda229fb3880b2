"""DSPy's response cache leaves the server out of its key: two servers under one model name must never share
cached replies (each role's LM keys its cache by the server it talks to), while one server keeps its hits."""

from __future__ import annotations

import dspy
import pytest
from dspy.clients.cache import Cache
from dspy.lm15 import Message, Response, TextPart, Usage

from memtrace_opt.lm.roles import ModelSpec, build_lm, server_cache_id
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.testing.openai_server import FakeOpenAIServer


class _Replying:
    """An engine that always gives one reply: which server answered."""

    def __init__(self, text: str) -> None:
        self.text = text

    def complete(self, request) -> Response:
        return Response(id=None, model="shared", message=Message.assistant([TextPart(self.text)]),
                        finish_reason="stop", usage=Usage(input_tokens=5, output_tokens=2, total_tokens=7))


def _replying(text: str) -> _Replying:
    return _Replying(text)


@pytest.fixture
def memory_cache(monkeypatch):
    """A fresh in-memory DSPy cache for the test (DSPy's own default writes to the user's disk)."""
    cache = Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None)
    monkeypatch.setattr(dspy, "cache", cache)
    return cache


def _ask(lm) -> str:
    return lm("Which server are you?")[0]


def test_two_servers_under_one_model_name_never_share_cached_replies(memory_cache, recwarn):
    with FakeOpenAIServer(_replying("server A")) as a, FakeOpenAIServer(_replying("server B")) as b:
        usage = UsageTracker()
        lm_a = build_lm(ModelSpec(model="openai/shared", api_base=a.api_base, extra={"cache": True}), usage=usage)
        lm_b = build_lm(ModelSpec(model="openai/shared", api_base=b.api_base, extra={"cache": True}), usage=usage)

        assert _ask(lm_a) == "server A"
        assert _ask(lm_b) == "server B"  # on a shared key this came from A's cached reply
        assert len(a.requests) == len(b.requests) == 1

        assert _ask(lm_a) == "server A" and _ask(lm_b) == "server B"  # each server's own reply is still cached
        assert len(a.requests) == len(b.requests) == 1
        assert usage.snapshot()["task"].cache_hits == 2
        assert all("rollout_id" not in body for body in a.requests + b.requests)  # nothing extra on the wire
    assert not [w for w in recwarn if "rollout_id" in str(w.message)]


def test_the_cache_id_names_the_server_and_keeps_a_users_rollout_apart():
    assert server_cache_id("http://127.0.0.1:8000/v1") == server_cache_id("http://127.0.0.1:8000/v1/")
    assert server_cache_id("http://127.0.0.1:8000/v1") != server_cache_id("http://127.0.0.1:8001/v1")
    assert server_cache_id("http://h:1/v1", 3) != server_cache_id("http://h:1/v1", 4)
    assert server_cache_id("http://h:1/v1") != server_cache_id("http://h:1/v1", 0)
    assert isinstance(server_cache_id("http://h:1/v1"), int)


def test_an_lm_without_a_server_keeps_dspys_key(memory_cache):
    lm = build_lm(ModelSpec(model="openai/gpt-4.1-mini"), role="judge")
    assert "rollout_id" not in lm.kwargs
