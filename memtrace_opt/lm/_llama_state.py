"""llama.cpp state kept across calls: a byte-bounded cache of KV states looked up by longest token prefix.

Imported only once llama_cpp is (see `embedded.require_llama_cpp`). Why our own and not `LlamaRAMCache`:
llama-cpp-python's `save_state` also copies its logits rows (n_batch x n_vocab floats, ~300 MB for Qwen2.5's
151,936-token vocabulary) into every saved state, and `LlamaRAMCache` counts only the KV bytes against its
capacity. Sampling runs in llama.cpp's sampler and a restored state always re-evaluates at least one token, so the
logits rows are never read back: `PrefixLlama` saves and restores the KV state and the token ids alone, and
`PrefixStateCache` counts every byte it holds.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import llama_cpp
import numpy as np
from llama_cpp.llama import LlamaState
from llama_cpp.llama_cache import BaseLlamaCache

from memtrace_opt.lm.embedded import PromptReuse, Timings

__all__ = ["PrefixLlama", "PrefixStateCache", "LlamaTimings"]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


@dataclass(frozen=True)
class LlamaTimings:
    """Reads llama.cpp's performance counters of one context (reset before a call, read after it)."""

    ctx: object

    def reset(self) -> None:
        llama_cpp.llama_perf_context_reset(self.ctx)

    def read(self) -> Timings:
        perf = llama_cpp.llama_perf_context(self.ctx)
        return Timings(int(perf.n_p_eval), perf.t_p_eval_ms / 1000.0, int(perf.n_eval), perf.t_eval_ms / 1000.0)


class PrefixStateCache(BaseLlamaCache):
    """KV states keyed by the tokens they hold; a lookup returns the state sharing the longest prefix.

    Bounded in bytes (every byte of a state, its token ids included); least recently used states go first.
    """

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self._states: OrderedDict[tuple[int, ...], tuple[np.ndarray, LlamaState]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.lookups = 0

    @staticmethod
    def _size(state: LlamaState) -> int:
        return int(state.llama_state_size) + int(state.input_ids.nbytes) + int(state.scores.nbytes)

    @property
    def cache_size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._states)

    def __bool__(self) -> bool:
        """Always true: llama-cpp-python consults (and fills) its cache only `if self.cache:`."""
        return True

    def longest(self, tokens: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        query = np.asarray(tokens, dtype=np.intc)
        best, best_len = None, 0
        for key, (ids, _) in self._states.items():
            shared = common_prefix(ids, query)
            if shared > best_len:
                best, best_len = key, shared
        return best, best_len

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        self.lookups += 1
        found, _ = self.longest(key)
        if found is None:
            raise KeyError("no kept state shares a prefix")
        self.hits += 1
        self._states.move_to_end(found)
        return self._states[found][1]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, Sequence) and self.longest(key)[0] is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        tokens = tuple(int(t) for t in key)
        if tokens in self._states:
            self._bytes -= self._size(self._states.pop(tokens)[1])
        size = self._size(value)
        if size > self.capacity_bytes:
            return
        self._states[tokens] = (np.asarray(tokens, dtype=np.intc), value)
        self._bytes += size
        while self._bytes > self.capacity_bytes and self._states:
            _, (_, old) = self._states.popitem(last=False)
            self._bytes -= self._size(old)


class PrefixLlama(llama_cpp.Llama):
    """`Llama` whose saved states hold the KV cache and token ids only, and which records each call's reuse."""

    _empty_scores = np.zeros((0, 0), dtype=np.single)

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.reuse = PromptReuse()
        self.timings = LlamaTimings(self._ctx.ctx)
        self.aligned_reuse = False  # set per call by the engine (EngineLevers.aligned_reuse)
        self._prefilled = 0  # leading positions of the context's KV that a prompt evaluation wrote
        self._checked_grammar: GreedyGrammar | None = None
        self.greedy_grammar = True  # False: the grammar masks every candidate at every step (llama.cpp's way)

    def save_state(self) -> LlamaState:
        size = llama_cpp.llama_state_get_size(self._ctx.ctx)
        buffer = (ctypes.c_uint8 * int(size))()
        written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
        if written > int(size):
            raise RuntimeError("llama.cpp wrote more state than it sized")
        state = LlamaState(
            input_ids=self.input_ids.copy(),
            scores=self._empty_scores,
            n_tokens=self.n_tokens,
            llama_state=bytes(memoryview(buffer)[:written]),
            llama_state_size=written,
            seed=self._seed,
        )
        state.n_prefilled = min(self._prefilled, self.n_tokens)  # type: ignore[attr-defined]
        return state

    def load_state(self, state: LlamaState) -> None:
        self.input_ids = state.input_ids.copy()
        self.n_tokens = state.n_tokens
        self._prefilled = int(getattr(state, "n_prefilled", 0))
        self._requires_eval = True
        self._seed = state.seed
        buffer = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(self._ctx.ctx, buffer, state.llama_state_size) != state.llama_state_size:
            raise RuntimeError("llama.cpp could not restore a kept state")

    def _init_sampler(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        """At temperature 0 a grammar is checked on the greedy token instead of applied to the whole vocabulary
        before it (`GreedyGrammar`): the same token, without masking ~150k candidates at every step."""
        if self._checked_grammar is not None:
            self._checked_grammar.close()
            self._checked_grammar = None
        grammar = kwargs.get("grammar")
        if (self.greedy_grammar and grammar is not None and kwargs.get("temp") == 0.0
                and kwargs.get("logits_processor") is None):
            self._checked_grammar = GreedyGrammar(self, grammar)
            kwargs["grammar"] = None
        return super()._init_sampler(*args, **kwargs)

    def sample(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        token = super().sample(*args, **kwargs)
        if self._checked_grammar is None:
            return token
        idx = kwargs.get("idx")
        return self._checked_grammar.choose(token, idx - self.n_tokens if idx is not None else -1)

    def generate(self, tokens, *args, **kwargs):  # type: ignore[no-untyped-def]
        """Aligned reuse: keep only whole `n_batch` chunks that an earlier prompt evaluation wrote, so the rest is
        evaluated in the same chunks as in a fresh context and the completion is the one a fresh context gives
        (llama.cpp's results depend on how a prompt is split into batches)."""
        tokens = list(tokens)
        shared = common_prefix(np.asarray(self._input_ids[: self.n_tokens], dtype=np.intc),
                               np.asarray(tokens, dtype=np.intc)) if self.n_tokens else 0
        reusable = min(shared, max(len(tokens) - 1, 0))
        if self.aligned_reuse:
            reusable = (min(reusable, self._prefilled) // self.n_batch) * self.n_batch
            if reusable < self.n_tokens:
                self.n_tokens = reusable  # the parent's prefix match stops here; it evaluates the rest
        self.reuse = PromptReuse(prompt=len(tokens), cached=reusable)
        self._prefilled = len(tokens)
        return super().generate(tokens, *args, **kwargs)


class GreedyGrammar:
    """A grammar checked against greedy decoding: the greedy token stands when the grammar accepts it; only
    otherwise is the grammar applied to every candidate and the best allowed token taken. At temperature 0 this
    picks exactly the token that masking first and then taking the argmax picks (the argmax of the allowed
    tokens is the overall argmax whenever that one is allowed), for much less work per step."""

    _dtype = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)

    def __init__(self, llama: llama_cpp.Llama, grammar: object) -> None:
        self._llama = llama
        text, root = grammar._grammar, grammar._root  # type: ignore[attr-defined]
        self._sampler = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, text.encode(), root.encode())
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the reply grammar")
        self._n_vocab = llama.n_vocab()
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all: ctypes.Array[llama_cpp.llama_token_data] | None = None
        self.full_checks = 0

    def _allows(self, token: int) -> bool:
        self._one[0] = llama_cpp.llama_token_data(token, 0.0, 0.0)
        candidates = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(candidates))
        return bool(np.isfinite(self._one[0].logit))

    def choose(self, greedy: int, ridx: int) -> int:
        token = greedy
        if not self._allows(greedy):
            self.full_checks += 1
            if self._all is None:
                self._all = (llama_cpp.llama_token_data * self._n_vocab)()
            view = np.frombuffer(memoryview(self._all).cast("B"), dtype=self._dtype)
            logits = llama_cpp.llama_get_logits_ith(self._llama._ctx.ctx, ridx)
            view["id"] = np.arange(self._n_vocab, dtype=np.intc)
            view["logit"] = np.ctypeslib.as_array(logits, shape=(self._n_vocab,))
            view["p"] = 0.0
            candidates = llama_cpp.llama_token_data_array(data=self._all, size=self._n_vocab, selected=-1,
                                                          sorted=False)
            llama_cpp.llama_sampler_apply(self._sampler, ctypes.byref(candidates))
            token = int(np.argmax(view["logit"]))
        llama_cpp.llama_sampler_accept(self._sampler, token)
        return token

    def close(self) -> None:
        if self._sampler:
            llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None
