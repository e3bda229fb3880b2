from __future__ import annotations

from memtrace_opt.embed import get_embedder
from memtrace_opt.memory import MemoryStore, SearchIndex, rrf_fuse


def _store_and_index():
    store = MemoryStore()
    index = SearchIndex(store, get_embedder("hash"))
    return store, index


def test_index_follows_updates_and_never_returns_deleted_units():
    store, index = _store_and_index()
    city = store.add("Maya moved to Boston for a nursing job")
    dog = store.add("Theo adopted a beagle named Biscuit")
    store.update(city.unit_id, "Maya moved to Denver for a nursing job")
    store.delete(dog.unit_id)

    for mode in ("dense", "bm25", "hybrid"):
        hits = index.search("where did Maya move", 5, mode)
        assert [h.unit.ref for h in hits][:1] == ["mem:memory-1@2"], mode
        assert all(h.unit.unit_id != dog.unit_id for h in hits), mode
    assert index.search("beagle Biscuit", 5, "bm25") == []
    assert len(index) == 1


def test_rrf_fuses_by_reciprocal_rank():
    fused = rrf_fuse([["a", "b", "c"], ["c", "a"]], k=60)
    scores = dict(fused)
    assert fused[0][0] == "a"  # rank 1 + rank 2
    assert abs(scores["a"] - (1 / 61 + 1 / 62)) < 1e-12
    assert abs(scores["b"] - 1 / 62) < 1e-12
    assert abs(scores["c"] - (1 / 63 + 1 / 61)) < 1e-12


def test_empty_index_and_empty_query_return_nothing():
    _, index = _store_and_index()
    assert index.search("anything", 3, "hybrid") == []
    store, index = _store_and_index()
    store.add("some text")
    assert index.lexical("the a of", 3) == []  # only stop words
