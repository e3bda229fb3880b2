"""The replay memo shared by every evaluation of one optimization: recorded op outputs by content key.

Every traced run (baseline, minibatch, candidate, the QA wrapper's write path) feeds the memo; every later run
replays through it (`memtrace_opt.tracing.RecordedControl`), so an operation whose op name, instruction, demos
and inputs are unchanged returns its recorded outputs without an LM call. Rewriting the answer prompt therefore
re-runs only the answer calls; store-writing ops always run (cheap, no LM), rebuilding the store faithfully.

The memo is namespaced by (task LM name, conversation key): outputs of one model are never served to another.
It also keeps, per content key, the prompt the LM saw and its reply, the evidence the proposer shows.

Workers sharing one optimization exchange what they learned: `export(since)` gives the entries learned after a
mark (JSON-ready), `merge(payload)` adds another worker's (first recording wins; merged entries are not
exported again).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.tracing import Event, LMCallEvent, OpEvent, RecordedControl, recorded_ops
from memtrace_opt.tracing.replay import RecordedOp

__all__ = ["LMExchange", "ReplayMemo", "lm_name"]


@dataclass(frozen=True)
class LMExchange:
    """What an LM-backed op call showed the LM (the last user message) and what it replied."""

    prompt: str
    response: str


def lm_name(lm: Any = None) -> str:
    """The model name of `lm` (default: the configured `dspy.settings.lm`), "" when none."""
    lm = lm if lm is not None else dspy.settings.lm
    return str(getattr(lm, "model", "") or "")


class ReplayMemo:
    """Thread-safe memo of recorded op outputs, per (model, conversation key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[tuple[str, str], dict[str, list[RecordedOp]]] = {}
        self._exchanges: dict[str, LMExchange] = {}
        self._learned: list[tuple[tuple[str, str], str]] = []  # (namespace, content key) in the order learned
        self._answered: set[tuple[str, str]] = set()  # (program digest, case id): a traced answer is recorded
        self._stats: dict[str, list[float]] = {}  # predictor -> [live calls, seconds, prompt tokens, completion tokens]

    def control(self, conversation_key: str, model: str | None = None) -> RecordedControl:
        """A fresh replay control over everything recorded so far for this conversation and model."""
        namespace = (model if model is not None else lm_name(), conversation_key)
        with self._lock:
            by_key = self._ops.get(namespace, {})
            ops = [op for calls in by_key.values() for op in calls]
        return RecordedControl(ops)

    def learn(self, conversation_key: str, events: Iterable[Event], model: str | None = None) -> int:
        """Adds the op calls of a traced run; returns how many new content keys it learned. Failed calls and
        calls whose key is already known are not added (the first recording of a key wins), nor calls a scoped
        replay served (`scoped.py`)."""
        # outputs a scoped replay served are the current program's, not this run's: never learned
        events = [e for e in events if not (isinstance(e, OpEvent) and e.replayed == "scoped")]
        namespace = (model if model is not None else lm_name(), conversation_key)
        grouped: dict[str, list[RecordedOp]] = {}
        for op in recorded_ops(events):
            if op.writes_store or op.content_key is None or op.outputs is None or op.error:
                continue
            grouped.setdefault(op.content_key, []).append(op)
        exchanges = _exchanges(events)
        watched = _live_calls(events)
        with self._lock:
            for predictor, (calls, seconds, prompt, completion) in watched.items():
                held = self._stats.setdefault(predictor, [0, 0.0, 0, 0])
                held[0], held[1], held[2], held[3] = (held[0] + calls, held[1] + seconds, held[2] + prompt,
                                                      held[3] + completion)
            known = self._ops.setdefault(namespace, {})
            fresh = {key: calls for key, calls in grouped.items() if key not in known}
            known.update(fresh)
            self._learned.extend((namespace, key) for key in fresh)
            for key, exchange in exchanges.items():
                self._exchanges.setdefault(key, exchange)
        return len(fresh)

    def call_stats(self) -> dict[str, tuple[int, float, int, int]]:
        """Per predictor, the live LM calls of every traced run learned: (calls, seconds, prompt tokens, completion
        tokens). What a call of that predictor costs on this machine (the round's pricing)."""
        with self._lock:
            return {name: (int(v[0]), float(v[1]), int(v[2]), int(v[3])) for name, v in self._stats.items()}

    def note_answered(self, digest: str, case_ids: Iterable[str]) -> None:
        """The program whose state digests to `digest` answered these cases in a traced run the memo learned."""
        with self._lock:
            self._answered.update((digest, case_id) for case_id in case_ids)

    def answered(self, digest: str, case_id: str) -> bool:
        with self._lock:
            return (digest, case_id) in self._answered

    def knows(self, conversation_key: str, model: str | None = None) -> bool:
        """Whether any op call of this conversation is recorded for `model` (default: the configured LM's name)."""
        namespace = (model if model is not None else lm_name(), conversation_key)
        with self._lock:
            return bool(self._ops.get(namespace))

    def mark(self) -> int:
        """A position in what this memo learned itself: `export(mark)` gives what it learned after."""
        with self._lock:
            return len(self._learned)

    def export(self, since: int = 0) -> dict[str, Any]:
        """The entries this memo learned itself after mark `since`, with their LM exchanges, as JSON-ready data
        (`merge` reads it)."""
        with self._lock:
            learned = self._learned[since:]
            entries: list[Any] = [[namespace[0], namespace[1], key,
                                   [[op.seq, op.op, op.outputs] for op in self._ops[namespace][key]]]
                                  for namespace, key in learned]
            exchanges = {key: [x.prompt, x.response] for _, key in learned
                         if (x := self._exchanges.get(key)) is not None}
        return {"ops": entries, "exchanges": exchanges}

    def merge(self, payload: dict[str, Any]) -> int:
        """Adds entries another memo exported; returns how many content keys were new here."""
        added = 0
        with self._lock:
            for model, conversation, key, calls in payload.get("ops", ()):
                known = self._ops.setdefault((model, conversation), {})
                if key in known:
                    continue
                known[key] = [RecordedOp(seq, op, key, outputs, False) for seq, op, outputs in calls]
                added += 1
            for key, (prompt, response) in payload.get("exchanges", {}).items():
                self._exchanges.setdefault(key, LMExchange(prompt=prompt, response=response))
        return added

    def exchange(self, content_key: str | None) -> LMExchange | None:
        """The prompt and reply recorded for an LM-backed op call with this content key, if any."""
        if content_key is None:
            return None
        with self._lock:
            return self._exchanges.get(content_key)

    def copy(self) -> ReplayMemo:
        """An independent memo holding everything recorded so far (optimizers compared from the same start)."""
        other = ReplayMemo()
        with self._lock:
            other._ops = {ns: dict(by_key) for ns, by_key in self._ops.items()}
            other._exchanges = dict(self._exchanges)
            other._answered = set(self._answered)
            other._stats = {name: list(v) for name, v in self._stats.items()}
        return other

    def size(self) -> int:
        with self._lock:
            return sum(len(by_key) for by_key in self._ops.values())


def _exchanges(events: list[Event]) -> dict[str, LMExchange]:
    """content key -> the last LM exchange made inside that op call (live calls only)."""
    keys = {e.call_id: e.content_key for e in events if isinstance(e, OpEvent) and e.content_key}
    out: dict[str, LMExchange] = {}
    for event in events:
        if not isinstance(event, LMCallEvent) or event.op_call_id not in keys or event.error:
            continue
        user = next((m for m in reversed(event.messages) if isinstance(m, dict) and m.get("role") == "user"), None)
        prompt = _text(user.get("content")) if user else ""
        out[str(keys[event.op_call_id])] = LMExchange(prompt=prompt, response=str(event.response or ""))
    return out


def _live_calls(events: list[Event]) -> dict[str, tuple[int, float, int, int]]:
    """Per predictor, the live (not cached, not failed) LM calls made inside its op calls."""
    predictor = {e.call_id: e.predictor for e in events if isinstance(e, OpEvent) and e.predictor}
    out: dict[str, tuple[int, float, int, int]] = {}
    for event in events:
        if isinstance(event, LMCallEvent) and not event.cached and not event.error:
            name = predictor.get(event.op_call_id or "")
            if name:
                calls, seconds, prompt, completion = out.get(name, (0, 0.0, 0, 0))
                out[name] = (calls + 1, seconds + event.seconds, prompt + (event.prompt_tokens or 0),
                             completion + (event.completion_tokens or 0))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return str(content or "")
