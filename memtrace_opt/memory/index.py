"""Search over the live units of a store: dense (an Embedder), lexical (BM25 via bm25s), or hybrid (RRF).

An index observes its store, so it always reflects the latest live version of every unit; searching never
returns a deleted unit or a superseded version.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtrace_opt.embed import Embedder
from memtrace_opt.memory.store import MemoryStore, MemoryUnit, StoreEvent
from memtrace_opt.text.words import FACT_STOP_WORDS

log = logging.getLogger(__name__)

__all__ = ["Hit", "SearchIndex", "rank_texts", "rrf_fuse", "rrf_fuse_indices", "tokenize"]

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """BM25's terms: lower-case words and numbers less `FACT_STOP_WORDS` (the words attribution reads too)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in FACT_STOP_WORDS]


@dataclass(frozen=True)
class Hit:
    unit: MemoryUnit
    score: float


def rrf_fuse(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of several ranked id lists: score(id) = sum 1 / (k + rank), rank from 1."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def rrf_fuse_indices(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    """`rrf_fuse` over ranked lists of indices: the fused indices, best first, ties to the lower index."""
    return [int(i) for i, _ in rrf_fuse([[f"{i:08d}" for i in ranking] for ranking in rankings], k=k)]


def rank_texts(texts: Sequence[str], query: str, pool: int, *, embedder: str | None = "minilm") -> list[int]:
    """Indices of the `texts` most related to `query`, best first: the BM25 and dense top-`pool` lists fused by
    RRF (k=60). BM25 alone when `embedder` is None or cannot be loaded (logged); texts sharing no query term and
    ranked by neither list are left out."""
    if not texts or pool <= 0:
        return []
    rankings = [_bm25_rank(texts, query, pool)]
    if embedder is not None:
        try:
            rankings.append(_dense_rank(texts, query, pool, embedder))
        except Exception as error:  # noqa: BLE001 - a missing embedder degrades to BM25 only
            log.warning("ranking without dense similarity (%s: %s)", type(error).__name__, error)
    return rrf_fuse_indices(rankings)[:pool]


def _bm25_rank(texts: Sequence[str], query: str, pool: int) -> list[int]:
    import bm25s

    terms = tokenize(query)
    if not terms:
        return []
    retriever = bm25s.BM25()
    retriever.index([tokenize(t) or ["_"] for t in texts], show_progress=False)
    docs, scores = retriever.retrieve([terms], k=min(pool, len(texts)), show_progress=False, n_threads=1)
    return [int(d) for d, s in zip(docs[0], scores[0], strict=False) if float(s) > 0]


def _dense_rank(texts: Sequence[str], query: str, pool: int, embedder: str) -> list[int]:
    from memtrace_opt.embed import get_embedder

    model = get_embedder(embedder)
    matrix = model.embed(list(texts))
    scores = matrix @ model.embed([query])[0]
    return sorted(range(len(texts)), key=lambda i: (-float(scores[i]), i))[:pool]


class SearchIndex:
    """Dense + BM25 index of a store's live units, kept in sync through the store's observer reports.

    `accept` (optional) limits the index to the units it returns True for (e.g. only episodes and events,
    not the raw MemCells they were extracted from); units it rejects are never embedded or returned.
    """

    def __init__(self, store: MemoryStore, embedder: Embedder, *, text_of=None, accept=None) -> None:
        self.store = store
        self.embedder = embedder
        self._text_of = text_of or (lambda unit: unit.text)
        self._accept = accept or (lambda unit: True)
        self._units: dict[str, MemoryUnit] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._bm25: Any = None
        self._bm25_ids: list[str] = []
        self._lock = threading.RLock()
        for unit in store.active():
            self._upsert(unit)
        store.subscribe(self)

    # store observer --------------------------------------------------------------------------------
    def on_store_event(self, event: StoreEvent) -> None:
        if event.action in ("add", "update"):
            self._upsert(event.unit)
        elif event.action == "delete":
            with self._lock:
                self._units.pop(event.unit.unit_id, None)
                self._vectors.pop(event.unit.unit_id, None)
                self._bm25 = None

    def _upsert(self, unit: MemoryUnit) -> None:
        if not self._accept(unit):
            return
        vector = self.embedder.embed([self._text_of(unit)])[0]
        with self._lock:
            self._units[unit.unit_id] = unit
            self._vectors[unit.unit_id] = vector
            self._bm25 = None

    # search ----------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._units)

    def dense(self, query: str, k: int) -> list[Hit]:
        with self._lock:
            ids = list(self._units)
            if not ids or k <= 0:
                return []
            matrix = np.stack([self._vectors[i] for i in ids])
        q = self.embedder.embed([query])[0]
        scores = matrix @ q
        order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), i))[:k]
        return [Hit(self._units[ids[i]], float(scores[i])) for i in order]

    def lexical(self, query: str, k: int) -> list[Hit]:
        import bm25s

        with self._lock:
            if not self._units or k <= 0:
                return []
            if self._bm25 is None:
                self._bm25_ids = list(self._units)
                corpus = [tokenize(self._text_of(self._units[i])) or ["_"] for i in self._bm25_ids]
                retriever = bm25s.BM25()
                retriever.index(corpus, show_progress=False)
                self._bm25 = retriever
            retriever, ids = self._bm25, list(self._bm25_ids)
            units = dict(self._units)
        terms = tokenize(query)
        if not terms:
            return []
        docs, scores = retriever.retrieve([terms], k=min(k, len(ids)), show_progress=False, n_threads=1)
        hits = [Hit(units[ids[int(d)]], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if float(s) > 0]
        return hits

    def hybrid(self, query: str, k: int, *, pool: int = 50, rrf_k: int = 60) -> list[Hit]:
        """RRF over the dense and BM25 top-`pool` lists; the score is the fused RRF score."""
        dense = self.dense(query, pool)
        lexical = self.lexical(query, pool)
        fused = rrf_fuse([[h.unit.unit_id for h in dense], [h.unit.unit_id for h in lexical]], k=rrf_k)
        with self._lock:
            return [Hit(self._units[i], s) for i, s in fused[:k] if i in self._units]

    def search(self, query: str, k: int, mode: str = "dense") -> list[Hit]:
        if mode == "dense":
            return self.dense(query, k)
        if mode == "bm25":
            return self.lexical(query, k)
        if mode == "hybrid":
            return self.hybrid(query, k)
        raise ValueError(f"unknown search mode {mode!r}: dense, bm25 or hybrid")
