"""The protocol every memory system follows, built-in or a user's own.

A memory program is a `dspy.Module` whose sub-modules are its operations (`memtrace_opt.memory.ops`). It has
a write path and a read path, and keeps no memory on itself:

* `new_state(conversation) -> MemoryState`: fresh, empty per-conversation state (the store, its search index,
  any buffers). Memory lives only here, so one program object can serve many conversations in many threads.
* `memorize(conversation, state)`: the write path, session by session, in order, turn timestamps kept
  (`memorize_session` is called per session).
* `respond(question, state) -> dspy.Prediction`: the read path; the prediction carries `answer` (str).
* `forward(conversation, question, state=None)`: memorize (unless `state` is given) then respond.

Rules for the trace to be complete: every step that reads or writes memory or calls an LM is an `Operation`
called as a module (`self.op(...)`, never `self.op.run(...)`); a `dspy.Module` you already have becomes one
with `as_op(module, "mysystem.step")` (`memtrace_opt.programs.module_op`); store writes happen only inside ops
whose `writes_store` is True; retrieval ops report what they return with `state.store.read(units)`; the
answering op is named `<system>.answer`, takes the `Question` as input `question` and returns `answer`.
Configuration is a dataclass (`Config`), recorded in the run config.

Lineage: the graph links a turn to the ops it reaches through their call arguments. Passing the `Turn`
objects (and `MemoryUnit`s) is exact; a string that holds a turn's text (a transcript you formatted) or a
unit's text is linked too, by matching text (edges marked `via: content`). What an op reads from
`state.extra`, an attribute or a global is invisible: `memtrace run` warns, naming the op, when memory units
or answers end up with no path from any turn.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import dspy

from memtrace_opt.data import Conversation, Question, Session
from memtrace_opt.embed import get_embedder
from memtrace_opt.memory.index import SearchIndex
from memtrace_opt.memory.store import MemoryStore

__all__ = ["ProgramConfig", "MemoryState", "MemoryProgram"]


@dataclass(frozen=True)
class ProgramConfig:
    """Settings shared by every system; each system extends it."""

    embedder: str = "minilm"
    top_k: int = 10

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ProgramConfig:
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            from memtrace_opt.errors import ConfigError

            raise ConfigError(f"{cls.__name__}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**data)


@dataclass
class MemoryState:
    """Everything one conversation's memory holds. Created by `new_state`, passed through every call."""

    conversation_id: str
    store: MemoryStore
    index: SearchIndex
    extra: dict[str, Any] = field(default_factory=dict)

    def __jsonable__(self) -> str:
        """How a trace (and a replay content key) shows a state passed to an op: the conversation and a digest
        of the live unit versions, so a read op's memo matches only when the store holds the same memory."""
        import hashlib

        refs = "|".join(unit.ref for unit in self.store.active())
        return f"state:{self.conversation_id}#{hashlib.sha256(refs.encode()).hexdigest()[:12]}"


class MemoryProgram(dspy.Module):
    """Base class of the memory systems. See the module docstring for the protocol."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[ProgramConfig]] = ProgramConfig

    def __init__(self, config: ProgramConfig | None = None) -> None:
        super().__init__()
        self.config = config if config is not None else self.Config()

    def new_state(self, conversation: Conversation) -> MemoryState:
        store = MemoryStore(store_id=f"{self.name}:{conversation.sample_id}")
        index = SearchIndex(store, get_embedder(self.config.embedder))
        return MemoryState(conversation_id=conversation.sample_id, store=store, index=index)

    def memorize(self, conversation: Conversation, state: MemoryState) -> None:
        for session in conversation.sessions:
            self.memorize_session(session, state)
        self.finish_memorize(state)

    def memorize_session(self, session: Session, state: MemoryState) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish_memorize(self, state: MemoryState) -> None:
        """Flush any buffered content at the end of the conversation (default: nothing)."""

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:  # pragma: no cover
        raise NotImplementedError

    def deployment_files(self) -> dict[str, str]:
        """Files a user deploys beside the saved program.json (file name -> text): for a program over another
        library, that library's configuration the prompts in force amount to (none by default)."""
        return {}

    def forward(
        self, conversation: Conversation, question: Question, state: MemoryState | None = None
    ) -> dspy.Prediction:
        if state is None:
            state = self.new_state(conversation)
            self.memorize(conversation, state)
        return self.respond(question, state)
