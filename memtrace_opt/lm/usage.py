"""LM usage by model role: calls, tokens, seconds, cache hits and failures.

`RoleLM` is a `dspy.LM` that knows its role and reports every call to a shared `UsageTracker`.
Tokens come from DSPy's own usage hook: for the duration of one call the LM installs a per-call
`dspy.settings.usage_tracker` (thread- and task-local, so concurrent calls never mix), which DSPy
fills for real calls and skips for cache hits; whatever it records is passed on to any tracker
that was active before (e.g. a user's `dspy.track_usage()`). This works the same for LiteLLM
models, the embedded engine and the fake engine.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import dspy
from dspy.utils.callback import with_callbacks
from dspy.utils.usage_tracker import UsageTracker as DspyUsageTracker
from rich.table import Table

from memtrace_opt.lm.chat_prompt import call_shape
from memtrace_opt.lm.reply_cache import CachedReply, ReplyCache, request_key


@dataclass(frozen=True)
class RoleUsage:
    """What one role's LM did. `calls` counts every call, cached or failed; `live_calls` those that reached the
    model (not served by a cache)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    failures: int = 0

    @property
    def live_calls(self) -> int:
        return self.calls - self.cache_hits

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoleUsage:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class UsageTracker:
    """Thread-safe usage totals by role. Copies of an LM share it (deepcopy returns the same tracker)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_role: dict[str, RoleUsage] = {}
        self._replies: dict[tuple[str, str], tuple[int, int]] = {}  # (role, call shape) -> live calls, reply tokens
        self._replayed = 0.0  # model seconds of the replies charged again (`replayed_seconds`)
        self.failure_streak = 0  # calls failed in a row, any role (a success or a cache hit resets it)

    def record(
        self,
        role: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        seconds: float = 0.0,
        cached: bool = False,
        failed: bool = False,
        shape: str | None = None,
        replayed: bool = False,
    ) -> None:
        """One call of `role`; `shape` (`chat_prompt.call_shape`): a live call's kind, whose reply length is kept
        apart (`take_replies`); `replayed`: a reply an earlier sitting paid for, charged again with the `seconds` it
        took then (`replayed_seconds`)."""
        with self._lock:
            if replayed:
                self._replayed += seconds
            if shape is not None and not cached and not failed and completion_tokens:
                calls, tokens = self._replies.get((role, shape), (0, 0))
                self._replies[(role, shape)] = (calls + 1, tokens + completion_tokens)
            old = self._by_role.get(role, RoleUsage())
            self._by_role[role] = replace(
                old,
                calls=old.calls + 1,
                prompt_tokens=old.prompt_tokens + prompt_tokens,
                completion_tokens=old.completion_tokens + completion_tokens,
                seconds=old.seconds + seconds,
                cache_hits=old.cache_hits + int(cached),
                failures=old.failures + int(failed),
            )
            self.failure_streak = self.failure_streak + 1 if failed else 0

    def take_replies(self, role: str) -> dict[str, tuple[int, int]]:
        """The reply lengths of `role`'s live calls since the last take, by call shape: (calls, reply tokens)."""
        with self._lock:
            taken = {shape: kept for (owner, shape), kept in self._replies.items() if owner == role}
            for shape in taken:
                del self._replies[(role, shape)]
        return taken

    def replayed_seconds(self) -> float:
        """The model time the replies charged again (`ReplyCache` `carried`) took when an earlier sitting paid for
        them: what a run's clock adds to the wall clock (`LMBudget.now`), so a resumed run spends its seconds as
        it would have in one sitting. Never reset: a clock does not go back."""
        with self._lock:
            return self._replayed

    def snapshot(self) -> dict[str, RoleUsage]:
        with self._lock:
            return dict(self._by_role)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {role: usage.to_dict() for role, usage in sorted(self.snapshot().items())}

    def reset(self) -> None:
        with self._lock:
            self._by_role.clear()
            self._replies.clear()
            self.failure_streak = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> UsageTracker:
        return self


class _CallCapture(DspyUsageTracker):
    """DSPy's usage tracker for one LM call: notes whether DSPy reported usage, and passes it on."""

    def __init__(self, parent: Any) -> None:
        super().__init__()
        self.parent = parent
        self.reported = False
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        self.reported = True
        self.prompt_tokens += int(usage_entry.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage_entry.get("completion_tokens") or 0)
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)


class RoleLM(dspy.LM):
    """A `dspy.LM` for one model role; every call is recorded in `usage` under `role`.

    A call DSPy answered from its cache reports no usage and counts as a cache hit. With a `reply_cache`
    (`reply_cache.py`) a request sent before is served from it: no model is reached, the trace still sees the call.
    """

    def __init__(self, model: str, *, role: str, usage: UsageTracker | None = None,
                 reply_cache: ReplyCache | None = None, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.role = role
        self.usage = usage if usage is not None else UsageTracker()
        self.reply_cache = reply_cache  # None: every call goes to DSPy (`reply_cache.py`)

    def _finish(self, capture: _CallCapture, started: float, failed: bool, messages: Any = None) -> None:
        live = capture.reported and not failed  # only a live reply's length is kept: its shape is parsed for it alone
        self.usage.record(
            self.role,
            prompt_tokens=capture.prompt_tokens,
            completion_tokens=capture.completion_tokens,
            seconds=time.perf_counter() - started,
            cached=not capture.reported and not failed,
            failed=failed,
            shape=call_shape(messages) if live else None,
        )

    def __call__(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
        cache = self.reply_cache
        if cache is None:
            return self._live(prompt, messages, kwargs)
        key = request_key(self.cache_identity, prompt, messages, {**self.kwargs, **kwargs})
        hit = cache.get(key)
        if hit is not None:
            return self._served(prompt=prompt, messages=messages, _reply=hit, _charged=cache.charge(key), **kwargs)
        capture, started = self._capture(), time.perf_counter()
        outputs = self._live(prompt, messages, kwargs, capture)
        cache.put(key, CachedReply(tuple(outputs or ()), capture.prompt_tokens, capture.completion_tokens,
                                   time.perf_counter() - started))
        return outputs

    async def acall(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
        cache = self.reply_cache
        key = request_key(self.cache_identity, prompt, messages, {**self.kwargs, **kwargs}) if cache else ""
        hit = cache.get(key) if cache is not None else None
        if hit is not None and cache is not None:
            return self._served(prompt=prompt, messages=messages, _reply=hit, _charged=cache.charge(key), **kwargs)
        capture, started, failed = self._capture(), time.perf_counter(), True
        try:
            with dspy.settings.context(usage_tracker=capture):
                outputs = await super().acall(prompt, messages=messages, **kwargs)
            failed = False
        finally:
            self._finish(capture, started, failed, messages)
        if cache is not None:
            cache.put(key, CachedReply(tuple(outputs or ()), capture.prompt_tokens, capture.completion_tokens,
                                       time.perf_counter() - started))
        return outputs

    def _capture(self) -> _CallCapture:
        return _CallCapture(dspy.settings.usage_tracker)

    def _live(self, prompt: Any, messages: Any, kwargs: dict[str, Any], capture: _CallCapture | None = None) -> Any:
        """The call made by DSPy (its callbacks, its history, its own cache where on), recorded in `usage`."""
        capture = capture or self._capture()
        started, failed = time.perf_counter(), True
        try:
            with dspy.settings.context(usage_tracker=capture):
                result = super().__call__(prompt, messages=messages, **kwargs)
            failed = False
            return result
        finally:
            self._finish(capture, started, failed, messages)

    @with_callbacks
    def _served(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> list[Any]:
        """A reply from the reply cache, as a call: the callbacks see it (a trace records it, `cached`), the
        history holds it with the original call's tokens, and `usage` counts it as a cache hit; `_charged` (a reply
        an earlier sitting paid for, `ReplyCache.charge`): as a live call, with what it cost then."""
        reply: CachedReply = kwargs.pop("_reply")
        charged: bool = kwargs.pop("_charged", False)
        outputs = [dict(o) if isinstance(o, dict) else o for o in reply.outputs]
        tokens = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
        if not dspy.settings.disable_history:  # a charged reply reads as the live call it was (`tracing.hook`)
            self.update_history({
                "prompt": prompt, "messages": messages, "kwargs": kwargs, "outputs": outputs,
                "usage": tokens if charged else {}, "response": _Served(tokens),
                "seconds": reply.seconds if charged else None,
                "cost": None, "model": self.model, "model_type": self.model_type,
            })
        if charged:
            self.usage.record(self.role, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                              seconds=reply.seconds, replayed=True)
        else:
            self.usage.record(self.role, cached=True)
        return outputs

    @property
    def cache_identity(self) -> str:
        """The model as it answers, for the reply cache's key: its name, its server and its engine's identity."""
        engine = getattr(self, "_engine_spec", None)
        identity = getattr(engine, "cache_identity", None)
        return "|".join(str(part) for part in (self.model, self.kwargs.get("api_base") or "",
                                               identity if isinstance(identity, str) else ""))


@dataclass(frozen=True)
class _Served:
    """What a history entry's `response` holds for a reply the cache served: the original call's token usage."""

    usage: dict[str, int]


def usage_table(snapshot: dict[str, RoleUsage], title: str = "LM usage by role") -> Table:
    """A rich table of a tracker snapshot, one row per role plus a total."""
    table = Table(title=title)
    for column in ("role", "calls", "prompt tok", "completion tok", "seconds", "cache hits", "failures"):
        table.add_column(column, justify="left" if column == "role" else "right")
    total = RoleUsage()
    for role, u in snapshot.items():
        table.add_row(role, str(u.calls), str(u.prompt_tokens), str(u.completion_tokens),
                      f"{u.seconds:.1f}", str(u.cache_hits), str(u.failures))
        total = RoleUsage(*(a + b for a, b in zip(asdict(total).values(), asdict(u).values(), strict=True)))
    if len(snapshot) > 1:
        table.add_row("total", str(total.calls), str(total.prompt_tokens), str(total.completion_tokens),
                      f"{total.seconds:.1f}", str(total.cache_hits), str(total.failures), style="bold")
    return table
