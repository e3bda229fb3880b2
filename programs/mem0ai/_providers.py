"""The providers a `Memory` gets after construction, where the trace attaches (imported once `mem0` is).

- `TracedLLM` (Mem0's `LLMBase`): each `generate_response` is one of the program's LLM ops (`Mem0Session.ask`).
- `RunEmbedder` (Mem0's `EmbeddingBase`): the run's embedder (MiniLM by default), in process, no server.
- `MirroredStore`: Mem0's own vector store, every call passed through; after each insert, update and delete
  succeeds the write is mirrored into the run's store by a traced op, and what each search returned is noted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mem0.embeddings.base import EmbeddingBase
from mem0.llms.base import LLMBase

from memtrace_opt.embed import Embedder
from memtrace_opt.programs.mem0ai.session import Mem0Session

__all__ = ["TracedLLM", "RunEmbedder", "MirroredStore", "attach"]


class TracedLLM(LLMBase):
    def __init__(self, session: Mem0Session) -> None:
        super().__init__({"model": "memtrace-task-lm"})
        self.session = session

    def generate_response(self, messages: list[dict[str, Any]], response_format: Any = None, tools: Any = None,
                          tool_choice: str = "auto", **kwargs: Any) -> str:
        return self.session.ask(messages)


class RunEmbedder(EmbeddingBase):
    def __init__(self, embedder: Embedder) -> None:
        super().__init__()
        self.embedder = embedder
        self.config.embedding_dims = embedder.dim

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return [float(x) for x in self.embedder.embed([text])[0]]

    def embed_batch(self, texts: Sequence[str], memory_action: str | None = "add") -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed(list(texts))]


class MirroredStore:
    """Mem0's vector store with its writes mirrored (module docstring); anything else is the store's own."""

    def __init__(self, inner: Any, session: Mem0Session) -> None:
        self._inner = inner
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def insert(self, vectors: Any, payloads: Any = None, ids: Any = None) -> Any:
        result = self._inner.insert(vectors=vectors, payloads=payloads, ids=ids)
        self._session.inserted([str(i) for i in ids or []], [str((p or {}).get("data", "")) for p in payloads or []])
        return result

    def update(self, vector_id: Any, vector: Any = None, payload: Any = None) -> Any:
        result = self._inner.update(vector_id=vector_id, vector=vector, payload=payload)
        if payload and isinstance(payload.get("data"), str):
            self._session.updated(str(vector_id), payload["data"])
        return result

    def delete(self, vector_id: Any) -> Any:
        result = self._inner.delete(vector_id=vector_id)
        self._session.deleted(str(vector_id))
        return result

    def search(self, *args: Any, **kwargs: Any) -> Any:
        found = self._inner.search(*args, **kwargs)
        self._session.searched([str(point.id) for point in found or []])
        return found


def attach(memory: Any, session: Mem0Session, embedder: Embedder) -> Any:
    """`memory` with the traced LLM, the run's embedder and the mirrored vector store set on it."""
    memory.llm = TracedLLM(session)
    memory.embedding_model = RunEmbedder(embedder)
    memory.vector_store = MirroredStore(memory.vector_store, session)
    return memory
