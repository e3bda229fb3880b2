"""Token F1, multi-answer F1, BLEU-1 and the stemmer, on examples worked by hand."""

from __future__ import annotations

import math

import pytest

from memtrace_opt.metrics import (
    answer_tokens,
    bleu1,
    multi_answer_f1,
    normalize_answer,
    token_f1,
    token_scores,
)
from memtrace_opt.text.porter import porter_stem


def test_normalize_answer() -> None:
    assert normalize_answer("The Boston, MA marathon!") == "boston ma marathon"
    assert normalize_answer("Tom and Jerry's cat") == "tom jerrys cat"  # apostrophe removed, "and" dropped
    assert normalize_answer("  An   apple\ta day ") == "apple day"
    assert normalize_answer(2022) == "2022"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "tie"),  # NLTK extension: 4-letter "-ies" words keep "ie"
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("sing", "sing"),
        ("conflated", "conflat"),
        ("hopping", "hop"),
        ("falling", "fall"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("generalization", "gener"),
        ("hopeful", "hope"),
        ("electrical", "electr"),
        ("dying", "die"),  # NLTK irregular form
        ("skies", "sky"),
        ("is", "is"),  # two letters or fewer are left alone
        ("running", "run"),
        ("moved", "move"),
    ],
)
def test_porter_stem(word: str, stem: str) -> None:
    assert porter_stem(word) == stem


def test_token_f1_hand_worked() -> None:
    # pred -> maya move to denver in june 2023 (7 tokens); gold -> june 2023; overlap 2.
    # P = 2/7, R = 2/2 = 1, F1 = 2 * (2/7) * 1 / (2/7 + 1) = (4/7) / (9/7) = 4/9.
    assert token_f1("Maya moved to Denver in June 2023", "June 2023") == pytest.approx(4 / 9)
    scores = token_scores("Maya moved to Denver in June 2023", "June 2023")
    assert (scores.precision, scores.recall) == (pytest.approx(2 / 7), 1.0)
    # "a cat cat" -> "cat cat"; gold "cat": overlap min(2, 1) = 1; P = 1/2, R = 1, F1 = 2/3.
    assert token_f1("a cat cat", "cat") == pytest.approx(2 / 3)
    # Stemming makes "running" and "runs" the same token "run".
    assert token_f1("running", "runs") == 1.0
    assert answer_tokens("The runs", stem=False) == ["runs"]


def test_token_f1_without_overlap_is_zero() -> None:
    assert token_f1("Denver", "Boston") == 0.0
    assert token_f1("", "") == 0.0  # upstream returns 0 when nothing overlaps, even for two empties
    assert token_f1("the", "a") == 0.0  # both normalize to nothing


def test_multi_answer_f1() -> None:
    # gold parts [boston, denver]; best F1 per part: boston 1, denver 0 -> mean 0.5.
    assert multi_answer_f1("Boston", "Boston, Denver") == 0.5
    assert multi_answer_f1("Denver, Boston", "Boston, Denver") == 1.0
    # gold parts [running, bouldering, pottery]; pred parts [pottery, running]: 1 + 0 + 1 over 3.
    assert multi_answer_f1("pottery, running", "running, bouldering, pottery") == pytest.approx(2 / 3)


def test_bleu1_hand_worked() -> None:
    # pred [june, 2023] vs gold [16, april, 2023]: clipped 1 of 2 -> 0.5; shorter than gold, so
    # BP = exp(1 - 3/2) = exp(-0.5); BLEU-1 = 0.5 * 0.60653 = 0.30327.
    assert bleu1("June 2023", "16 April 2023") == pytest.approx(0.5 * math.exp(-0.5))
    # pred [she, moved, in, june, 2023] vs gold [june, 2023]: 2 of 5 = 0.4, longer than gold, BP = 1.
    assert bleu1("She moved in June 2023", "June 2023") == pytest.approx(0.4)
    # Clipping: [denver, denver] vs [denver]: min(2, 1) = 1 of 2 = 0.5, BP = 1.
    assert bleu1("Denver Denver", "Denver") == pytest.approx(0.5)
    assert bleu1("", "Denver") == 0.0
    assert bleu1("Denver", "Denver") == 1.0
