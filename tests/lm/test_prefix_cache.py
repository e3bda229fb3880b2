"""The byte-bounded prefix state cache and the guarded, grammar-bound path of the embedded engine."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import dspy
import numpy as np
import pytest
from required import need_module

from memtrace_opt.lm.embedded import EmbeddedEngine, EngineLevers, LoadedModel

llama_cpp = need_module("llama_cpp", "pip install -e '.[local]'")

from memtrace_opt.lm._llama_state import PrefixStateCache, common_prefix  # noqa: E402


def _state(tokens: list[int], size: int = 100) -> Any:
    from llama_cpp.llama import LlamaState

    return LlamaState(np.asarray(tokens, dtype=np.intc), np.zeros((0, 0), dtype=np.single), len(tokens),
                      b"\0" * size, size, 0)


def test_the_state_sharing_the_longest_prefix_is_returned():
    cache = PrefixStateCache(capacity_bytes=10_000)
    assert cache  # llama-cpp-python skips an empty cache that is falsy, and would never fill it
    cache[[1, 2, 3, 4]] = _state([1, 2, 3, 4])
    cache[[1, 2, 9]] = _state([1, 2, 9])
    cache[[7, 7]] = _state([7, 7])
    assert cache[[1, 2, 3, 5, 6]].input_ids.tolist() == [1, 2, 3, 4]
    assert cache[[1, 2, 9, 9]].input_ids.tolist() == [1, 2, 9]
    assert [5] not in cache
    with pytest.raises(KeyError):
        cache[[5, 6]]
    assert common_prefix(np.array([1, 2, 3]), np.array([1, 2])) == 2


def test_the_cache_holds_no_more_bytes_than_its_capacity_dropping_the_least_recent():
    cache = PrefixStateCache(capacity_bytes=350)
    for first in (1, 2, 3):
        cache[[first, 0]] = _state([first, 0], size=100)  # 100 bytes of state + 8 of token ids each
    assert len(cache) == 3 and cache.cache_size <= 350
    cache[[1, 0, 5]]  # touch 1: now 2 is the least recently used
    cache[[4, 0]] = _state([4, 0], size=100)
    assert len(cache) == 3 and cache.cache_size <= 350
    assert [2, 0] not in cache and [1, 0] in cache
    cache[[9]] = _state([9], size=10_000)  # larger than the whole cache: not kept
    assert [9] not in cache


class StreamingStub:
    """Streams a reply a token-ish piece at a time, like llama-cpp-python's create_chat_completion(stream=True)."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.kwargs: dict[str, Any] = {}
        self.streamed = 0

    def create_chat_completion(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        self.kwargs = kwargs
        assert kwargs.get("stream") is True

        def pieces() -> Any:
            for i in range(0, len(self.reply), 4):
                self.streamed += 1
                yield {"choices": [{"delta": {"content": self.reply[i : i + 4]}, "finish_reason": None}]}
            yield {"choices": [{"delta": {}, "finish_reason": "length"}]}

        return pieces()


def test_a_looping_list_reply_is_cut_closed_and_parses(tmp_path: Path):
    loop = '[[ ## facts ## ]]\n["Theo adopted a beagle.", "Maya runs.", ' + '"Maya runs.", ' * 40
    stub = StreamingStub(loop)
    engine = EmbeddedEngine(f"embedded:{tmp_path / 'stub.gguf'}", levers=EngineLevers(prefix_cache_mb=0))
    loaded = LoadedModel(stub, threading.Lock(), tmp_path / "stub.gguf", 8192)
    engine.loaded = lambda: loaded  # type: ignore[method-assign]
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False, max_tokens=320, num_retries=0)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        facts = dspy.Predict("new_messages -> facts: list[str]")(new_messages="...").facts
    assert facts == ["Theo adopted a beagle.", "Maya runs."]
    assert stub.kwargs.get("grammar") is not None  # decoded under the reply grammar
    assert stub.streamed < len(loop) // 4  # stopped at the repeat, not at the end of the loop
