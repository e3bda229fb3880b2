"""One conversation's Mem0: the library's `Memory` with traced providers, and what one `add()` did.

`open_session` builds a `Memory` from the offline configuration plus the prompts the program's ops hold, then sets
on it the providers the trace attaches to (`_providers.py`): an LLM that calls the program's LLM ops, an embedder
over the run's embedder, and a vector store that mirrors every write into the run's store. While an `add()` runs,
its `Window` says which turns it holds and collects what Mem0 searched, what the LLM returned and what was written.

Mem0 1.0 runs `add()` and `search()` in worker threads; the providers run the ops in a copy of the context the
`mem0ai.add` op started in (`traced`), so the trace ties them to it whatever thread Mem0 uses.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dspy

from memtrace_opt.data import Turn
from memtrace_opt.memory.store import MemoryUnit, UnknownUnit
from memtrace_opt.programs.base import MemoryState
from memtrace_opt.programs.common import display_date
from memtrace_opt.programs.mem0ai._library import Pipeline

if TYPE_CHECKING:
    from memtrace_opt.programs.mem0ai.program import Mem0aiMemory

__all__ = ["Mem0Session", "Window", "open_session", "session_of", "messages_of", "USER_ID"]

log = logging.getLogger(__name__)

USER_ID = "conversation"  # one shared memory for every speaker of a conversation (as MemTrace ran Mem0)
_KEY = "mem0ai"


def session_of(state: MemoryState) -> Mem0Session:
    return state.extra[_KEY]


def messages_of(turns: Sequence[Turn], session_date: str | None) -> list[dict[str, str]]:
    """What `add()` is given for a window: a system line with the date the turns were said (Mem0's open-source
    `add()` takes no timestamp), then each turn as a user message "Speaker: text" (every speaker a user: 1.0's
    user-memory prompt skips assistant messages)."""
    head = [{"role": "system", "content": f"These messages were said on {display_date(session_date)}."}]
    return head + [{"role": "user", "content": f"{t.speaker}: {t.display_text()}"} for t in turns]


@dataclass
class Window:
    """One `add()`: its turns and what happened inside it."""

    turns: tuple[Turn, ...]
    session_date: str | None
    searches: list[list[str]] = field(default_factory=list)  # ids each vector-store search returned, in order
    calls: int = 0  # LLM calls made so far
    extracted: list[str] = field(default_factory=list)  # 2.x: the texts the LLM returned
    facts: list[str] = field(default_factory=list)  # 1.0: the facts the first call returned
    shown: list[str] = field(default_factory=list)  # 1.0: the ids shown to the update decision as "0", "1", ...
    actions: list[dict[str, Any]] = field(default_factory=list)  # 1.0: the update decision's actions
    used: set[int] = field(default_factory=set)  # positions in `actions` that a write carried out
    written: list[MemoryUnit] = field(default_factory=list)


@dataclass
class Mem0Session:
    """The `Memory` of one conversation and the bridge from its providers to the program's ops."""

    program: Mem0aiMemory
    state: MemoryState
    pipeline: Pipeline
    memory: Any = None
    window: Window | None = None
    _carrier: contextvars.Context | None = None
    _owner: int | None = None

    # add() and search() ------------------------------------------------------------------------------------------
    def add(self, turns: Sequence[Turn], session_date: str | None) -> dspy.Prediction:
        """`add()` of one window (the body of the `mem0ai.add` op); an exception from Mem0 is recorded as the
        op's error and the run goes on."""
        error = None
        with self._adding(turns, session_date) as window:
            try:
                self.memory.add(messages_of(turns, session_date), user_id=USER_ID)
            except Exception as exc:  # noqa: BLE001 - Mem0 raised (a reply it could not handle): one window lost
                error = f"mem0ai.add: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                log.warning("%s", error)
        return dspy.Prediction(memories=list(window.written), dropped=self.dropped(window), error=error)

    def search(self, query: str, k: int) -> list[tuple[str, float | None]]:
        """Mem0's `search()`: (memory id, score) best first."""
        if self.pipeline is Pipeline.ADDITIVE:
            found = self.memory.search(query, top_k=k, filters={"user_id": USER_ID})
        else:
            found = self.memory.search(query, user_id=USER_ID, limit=k)
        return [(str(r["id"]), r.get("score")) for r in found.get("results", [])]

    @contextmanager
    def _adding(self, turns: Sequence[Turn], session_date: str | None) -> Iterator[Window]:
        window = Window(tuple(turns), session_date)
        self.window, self._carrier, self._owner = window, contextvars.copy_context(), threading.get_ident()
        try:
            yield window
        finally:
            self.window, self._carrier, self._owner = None, None, None

    def traced(self, op: Any, **inputs: Any) -> dspy.Prediction:
        """Call `op` as the trace expects: here, or in Mem0's worker thread within the add's context."""
        if self._carrier is None or threading.get_ident() == self._owner:
            return op(**inputs)
        return self._carrier.copy().run(lambda: op(**inputs))

    # the LLM --------------------------------------------------------------------------------------------------------
    def ask(self, messages: list[dict[str, Any]]) -> str:
        """An LLM call of Mem0: the op of its place in the pipeline, with the turns and units its prompt shows."""
        window = self.window
        steps = self.program.llm_steps()
        if window is None or window.calls >= len(steps):
            log.warning("mem0ai: an LLM call outside the traced add() pipeline is answered empty")
            return ""
        op = steps[window.calls]
        window.calls += 1
        inputs: dict[str, Any] = {"messages": messages}
        if op.op_name == "mem0ai.update_decision":
            window.shown = list(dict.fromkeys(i for ids in window.searches for i in ids))
            inputs.update(facts=list(window.facts), existing=self._units(window.shown))
        else:
            inputs["turns"] = list(window.turns)
            if self.pipeline is Pipeline.ADDITIVE:
                inputs["existing"] = self._units(window.searches[0] if window.searches else [])
        outputs = self.traced(op, **inputs)
        window.extracted = list(outputs.get("memories") or window.extracted)
        window.facts = list(outputs.get("facts") or window.facts)
        window.actions = list(outputs.get("memory_actions") or window.actions)
        return op.reply_for_mem0(outputs)

    def _units(self, ids: Sequence[str]) -> list[MemoryUnit]:
        units = []
        for unit_id in ids:
            try:
                units.append(self.state.store.get(unit_id))
            except UnknownUnit:
                log.warning("mem0ai: Mem0 showed %s, which no traced write stored", unit_id)
        return units

    # the vector store -----------------------------------------------------------------------------------------------
    def searched(self, ids: Sequence[str]) -> None:
        if self.window is not None:
            self.window.searches.append(list(ids))

    def inserted(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        if self.pipeline is Pipeline.ADDITIVE:
            inputs: dict[str, Any] = {"memories": list(texts)}
        else:
            inputs = {"actions": [self._action("ADD", text=text) for text in texts]}
        self._write(self.program.store, ids=list(ids), **inputs)

    def updated(self, unit_id: str, text: str) -> None:
        try:
            if self.state.store.get(unit_id).text == text:
                return  # a change of its metadata only: the memory is the same
        except UnknownUnit:
            return
        self._write(self.program.update, ids=[unit_id], actions=[self._action("UPDATE", unit_id, text)])

    def deleted(self, unit_id: str) -> None:
        self._write(self.program.delete, ids=[unit_id], actions=[self._action("DELETE", unit_id)])

    def _write(self, op: Any, **inputs: Any) -> None:
        written = self.traced(op, state=self.state, **inputs).units
        if self.window is not None:
            self.window.written.extend(written)

    def _action(self, event: str, unit_id: str | None = None, text: str | None = None) -> dict[str, Any]:
        """The update decision's action this write carries out (so the write links to that call), else one
        that says what the write did."""
        window = self.window
        if window is not None:
            for i, action in enumerate(window.actions):
                if i in window.used or str(action.get("event", "")).upper() != event:
                    continue
                if text is not None and action.get("text") != text:
                    continue
                if unit_id is not None and self._shown_id(window, action.get("id")) != unit_id:
                    continue
                window.used.add(i)
                return action
        return {"event": event, **({"id": unit_id} if unit_id else {}), **({"text": text} if text else {})}

    @staticmethod
    def _shown_id(window: Window, position: Any) -> str | None:
        try:
            return window.shown[int(str(position))]
        except (ValueError, IndexError):
            return None

    # what was not stored --------------------------------------------------------------------------------------------
    def dropped(self, window: Window) -> list[dict[str, Any]]:
        """What the LLM returned that Mem0 did not store. 2.x: memories whose text a memory shown to it already has
        (Mem0 drops them by hash, without a word), repeated in the reply, or not stored; 1.0: actions no write
        carried out (an id it was not shown, no text)."""
        if self.pipeline is Pipeline.CLASSIC:
            return [self._skipped(window, a) for i, a in enumerate(window.actions)
                    if i not in window.used and str(a.get("event", "")).upper() in ("ADD", "UPDATE", "DELETE")]
        stored = Counter(u.text for u in window.written)
        shown = self._units(window.searches[0] if window.searches else [])
        out: list[dict[str, Any]] = []
        for i, text in enumerate(window.extracted):
            if stored[text] > 0:
                stored[text] -= 1
                continue
            same = next((u for u in shown if u.text == text), None)
            if same is not None:
                out.append({"text": text, "reason": "duplicate", "duplicate_of": same.unit_id})
            else:
                out.append({"text": text, "reason": "repeated" if text in window.extracted[:i] else "not stored"})
        return out

    def _skipped(self, window: Window, action: dict[str, Any]) -> dict[str, Any]:
        event = str(action.get("event", "")).upper()
        if not action.get("text"):
            reason = "no text"  # Mem0 skips an action without text, whatever its event
        elif event != "ADD" and self._shown_id(window, action.get("id")) is None:
            reason = "unknown id"
        else:
            reason = "not applied"
        return {**{k: v for k, v in action.items() if isinstance(v, (str, int, float))}, "reason": reason}


def open_session(program: Mem0aiMemory, state: MemoryState, config: dict[str, Any]) -> Mem0Session:
    """A `Memory` built from `config` with the traced providers set on it, kept in `state.extra`."""
    from mem0 import Memory
    from mem0.configs.base import MemoryConfig

    from memtrace_opt.programs.mem0ai._providers import attach

    session = Mem0Session(program, state, program.pipeline)
    session.memory = attach(Memory(MemoryConfig(**config)), session, state.index.embedder)
    state.extra[_KEY] = session
    return session
