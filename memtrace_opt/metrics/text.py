"""Lexical answer metrics as LoCoMo's upstream evaluation computes them.

- normalize_answer: drop commas, lower-case, remove punctuation, remove "a", "an", "the", "and",
  collapse whitespace (upstream `normalize_answer`).
- token_f1: F1 over Porter-stemmed normalized tokens (upstream `f1_score`; 0 when nothing overlaps,
  including when both sides are empty).
- multi_answer_f1: the multi-hop variant: split both sides on commas, and average over gold parts the
  best F1 any predicted part reaches (upstream `f1`).
- bleu1: clipped unigram precision times the brevity penalty, over normalized (unstemmed) tokens.
- content_recall: the share of the gold's content words (stemmed tokens less `text.words.SCORING_STOP_WORDS`)
  the prediction holds; the token rule's "every gold word" test reads it, so "Udaipur, December 2024" holds
  every word of "In Udaipur in December" (F1 counts the "in"s, as upstream does).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import NamedTuple

from memtrace_opt.text.porter import porter_stem
from memtrace_opt.text.words import SCORING_STOP_WORDS

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


class TokenScores(NamedTuple):
    precision: float
    recall: float
    f1: float


def normalize_answer(text: str) -> str:
    """LoCoMo's answer normalization: "The Boston, MA marathon!" -> "boston ma marathon"."""
    text = str(text).replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str, stem: bool = True) -> list[str]:
    """Normalized tokens, Porter-stemmed unless `stem` is False."""
    tokens = normalize_answer(text).split()
    return [porter_stem(t) for t in tokens] if stem else tokens


def token_scores(prediction: str, gold: str) -> TokenScores:
    """Precision, recall and F1 of stemmed prediction tokens against stemmed gold tokens."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return TokenScores(0.0, 0.0, 0.0)
    precision, recall = same / len(predicted), same / len(expected)
    return TokenScores(precision, recall, 2 * precision * recall / (precision + recall))


def content_tokens(text: str) -> list[str]:
    """Stemmed normalized tokens without `SCORING_STOP_WORDS`; all of them when nothing else is left."""
    tokens = normalize_answer(text).split()
    content = [t for t in tokens if t not in SCORING_STOP_WORDS] or tokens
    return [porter_stem(t) for t in content]


def content_recall(prediction: str, gold: str) -> float:
    """The share of the gold's content words (with repeats) found among the prediction's stemmed tokens; 0 for
    an empty gold."""
    expected = content_tokens(gold)
    if not expected:
        return 0.0
    return sum((Counter(answer_tokens(prediction)) & Counter(expected)).values()) / len(expected)


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo token F1 (see module docstring)."""
    return token_scores(prediction, gold).f1


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Multi-hop F1: mean over comma-separated gold parts of the best F1 against any predicted part."""
    predicted = [p.strip() for p in str(prediction).split(",")]
    expected = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in predicted) for g in expected) / len(expected)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1: clipped unigram precision times the brevity penalty exp(1 - len(gold) / len(pred))."""
    predicted, expected = answer_tokens(prediction, stem=False), answer_tokens(gold, stem=False)
    if not predicted or not expected:
        return 0.0
    clipped = sum((Counter(predicted) & Counter(expected)).values())
    precision = clipped / len(predicted)
    penalty = 1.0 if len(predicted) > len(expected) else math.exp(1 - len(expected) / len(predicted))
    return precision * penalty
