"""RAG memory: a token-counted message buffer becomes one chunk when the next turn would overflow it; chunks
are embedded and the top-k most similar to a question are the answer's context.

Write path: `rag.chunk` (no LM) takes the pending buffer and a session's turns and cuts chunks by the token
budget; each chunk's text carries its session date(s) and the speakers' names. `rag.index_chunk` stores one
chunk as a unit (its turns as `source_turns`). At the end of the conversation the rest of the buffer is cut
too (`flush`). Read path: `rag.retrieve` (dense, bm25 or hybrid) then `rag.answer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.data import Question, Session, Turn
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.ops import Operation
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import (
    CHARS_PER_TOKEN,
    PROMPT_OVERHEAD_TOKENS,
    AnswerOp,
    chronological,
    display_date,
    estimate_tokens,
    fit_units,
    turn_line,
)
from memtrace_opt.programs.tunable import tunable

__all__ = ["RAGConfig", "RAGMemory", "ChunkTurns", "IndexChunk", "RetrieveChunks", "chunk_text", "SEARCH_MODES"]

SEARCH_MODES = ("dense", "bm25", "hybrid")
CHUNK_KIND = "chunk"
BUFFER_KEY = "rag.buffer"


@dataclass(frozen=True)
class RAGConfig(ProgramConfig):
    """Sized for an 8k-context local model: 5 chunks of 256 tokens. MemTrace: 1,200-token buffer, top-k 10,
    dense search with Qwen3-Embedding-4B."""

    top_k: int = tunable(5, low=2, high=10, ops=("rag.retrieve", "rag.answer"),
                         cost="more chunks in every answer prompt")
    chunk_tokens: int = tunable(256, low=64, high=512, log=True, ops=("rag.chunk", "rag.index_chunk", "rag.retrieve"),
                                cost="larger chunks: longer answer prompts")
    search: str = tunable("dense", choices=SEARCH_MODES, ops=("rag.retrieve",),
                          cost="hybrid: a second search per question")  # dense | bm25 | hybrid (RRF over both)
    hybrid_pool: int = 50  # per-list depth fused by RRF
    rrf_k: int = 60
    context_tokens: int = 8192 - 1024 - PROMPT_OVERHEAD_TOKENS

    def __post_init__(self) -> None:
        if self.search not in SEARCH_MODES:
            raise ConfigError(f"rag: search must be one of {', '.join(SEARCH_MODES)}, got {self.search!r}")
        if self.chunk_tokens < 32 or self.top_k < 1:
            raise ConfigError("rag: chunk_tokens must be at least 32 and top_k at least 1")


def chunk_text(turns: Sequence[Turn]) -> str:
    """A chunk as stored and shown: "[date]" headers wherever the session date changes, "Speaker: text" lines."""
    lines: list[str] = []
    current: object = object()
    for turn in turns:
        if turn.timestamp != current:
            current = turn.timestamp
            lines.append(f"[{display_date(turn.timestamp)}]")
        lines.append(turn_line(turn))
    return "\n".join(lines)


def _split_long_turn(turn: Turn, budget: int) -> list[Turn]:
    """A turn too long for one chunk, as pieces that each fit (same dia_id, text cut between words)."""
    empty = Turn(turn.dia_id, turn.speaker, "", turn.session_index, turn.timestamp)
    room = max(16, (budget * CHARS_PER_TOKEN) - len(chunk_text([empty])) - 1)
    pieces: list[Turn] = []
    current: list[str] = []
    length = 0
    for word in turn.display_text().split():
        if current and length + 1 + len(word) > room:
            pieces.append(Turn(turn.dia_id, turn.speaker, " ".join(current), turn.session_index, turn.timestamp))
            current, length = [], 0
        current.append(word[:room])
        length += len(word[:room]) + (1 if length else 0)
    if current:
        pieces.append(Turn(turn.dia_id, turn.speaker, " ".join(current), turn.session_index, turn.timestamp))
    return pieces


class ChunkTurns(Operation):
    """Appends turns to the pending buffer; whenever the next turn would push the buffer's text over
    `budget_tokens`, the buffer becomes a chunk. With `flush` the remainder becomes a chunk too."""

    op_name = "rag.chunk"
    role = OpRole.FORMS

    def run(self, pending: Sequence[Turn], turns: Sequence[Turn], budget_tokens: int, flush: bool = False) -> dspy.Prediction:
        buffer = list(pending)
        chunks: list[dict[str, Any]] = []
        for turn in turns:
            pieces = [turn] if estimate_tokens(chunk_text([turn])) <= budget_tokens else _split_long_turn(turn, budget_tokens)
            for piece in pieces:
                if buffer and estimate_tokens(chunk_text([*buffer, piece])) > budget_tokens:
                    chunks.append(_chunk(buffer))
                    buffer = []
                buffer.append(piece)
        if flush and buffer:
            chunks.append(_chunk(buffer))
            buffer = []
        return dspy.Prediction(chunks=chunks, pending=buffer)


def _chunk(turns: Sequence[Turn]) -> dict[str, Any]:
    return {"text": chunk_text(turns), "turns": list(turns), "timestamp": turns[0].timestamp}


class IndexChunk(Operation):
    """Stores one chunk as a unit; the index embeds it."""

    op_name = "rag.index_chunk"
    role = OpRole.FORMS
    writes_store = True

    def run(self, chunk: dict[str, Any], state: MemoryState) -> dspy.Prediction:
        turns = chunk["turns"]
        unit = state.store.add(
            chunk["text"],
            kind=CHUNK_KIND,
            timestamp=chunk.get("timestamp"),
            source_turns=tuple(dict.fromkeys(t.dia_id for t in turns)),
        )
        return dspy.Prediction(unit=unit)


class RetrieveChunks(Operation):
    """The `k` chunks most similar to the question (dense, bm25 or hybrid RRF)."""

    op_name = "rag.retrieve"
    role = OpRole.RETRIEVES

    def run(self, question: Question, k: int, mode: str, state: MemoryState, pool: int = 50, rrf_k: int = 60) -> dspy.Prediction:
        if mode == "hybrid":
            hits = state.index.hybrid(question.question, k, pool=pool, rrf_k=rrf_k)
        else:
            hits = state.index.search(question.question, k, mode=mode)
        units = state.store.read(hit.unit for hit in hits)
        return dspy.Prediction(units=units, scores=[round(hit.score, 6) for hit in hits])


class AnswerRAG(AnswerOp):
    op_name = "rag.answer"


class RAGMemory(MemoryProgram):
    """Chunk, embed, retrieve top-k, answer."""

    name = "rag"
    Config = RAGConfig

    def __init__(self, config: RAGConfig | None = None) -> None:
        super().__init__(config)
        self.chunk = ChunkTurns()
        self.index_chunk = IndexChunk()
        self.retrieve = RetrieveChunks()
        self.answer = AnswerRAG()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        self._cut(state, list(session.turns), flush=False)

    def finish_memorize(self, state: MemoryState) -> None:
        if state.extra.get(BUFFER_KEY):
            self._cut(state, [], flush=True)

    def _cut(self, state: MemoryState, turns: list[Turn], flush: bool) -> None:
        out = self.chunk(
            pending=list(state.extra.get(BUFFER_KEY, [])), turns=turns, budget_tokens=self.config.chunk_tokens, flush=flush
        )
        state.extra[BUFFER_KEY] = list(out.pending)
        for chunk in out.chunks:
            self.index_chunk(chunk=chunk, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        cfg = self.config
        found = self.retrieve(question=question, k=cfg.top_k, mode=cfg.search, state=state, pool=cfg.hybrid_pool, rrf_k=cfg.rrf_k)
        return self.answer(question=question, context=chronological(fit_units(found.units, cfg.context_tokens)))
