from __future__ import annotations

import numpy as np
import pytest

from memtrace_opt.embed import get_embedder


@pytest.mark.parametrize("name", ["hash", "minilm"])
def test_embedders_give_unit_vectors_and_rank_paraphrases_first(name):
    embedder = get_embedder(name)
    texts = ["Maya moved to Denver last month.", "Maya relocated to Denver.", "Theo bakes sourdough bread."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, embedder.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2]
    again = embedder.embed([texts[2], texts[0]])
    assert np.allclose(again[1], vectors[0], atol=1e-6)  # same text, same vector (cached or not)


def test_minilm_matches_known_similarity_range():
    vectors = get_embedder("minilm").embed(["I moved to Denver last week.", "She relocated to Colorado."])
    assert 0.35 < float(vectors[0] @ vectors[1]) < 0.75


def test_unknown_embedder_is_refused():
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("word2vec")
