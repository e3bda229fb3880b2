"""What counts as an output carrying a gold answer or a repair's fact, word by word: the tests the local check,
the local set and the demo sources share (attribution's own, richer test is `NeededInfo.holds`)."""

from __future__ import annotations

from memtrace_opt.metrics.text import answer_tokens
from memtrace_opt.text.words import FACT_STOP_WORDS

__all__ = ["TARGET_SHARE", "carries", "gold_words", "item_share"]

# Words that carry no fact (stemmed as `answer_tokens` stems), the list attribution's `NeededInfo.holds` reads: a
# gold answer "They seem cheerful" is carried by "seem" and "cheer" alone. A share of the tokens (say half) is not
# enough: "Finding Harbours" would be carried by any "finding".
_FACT_STOP_WORDS = frozenset(answer_tokens(" ".join(sorted(FACT_STOP_WORDS))))


# a re-run produces a repair's fact when one part holds this share of its content words: the repair's own words
# ("yesterday ... (12 April, 2021)") and a candidate's ("on 11 April 2021") differ where both carry the fact
TARGET_SHARE = 0.7


def item_share(item: str, part: str) -> float:
    """The share of `item`'s content words (`gold_words`) that `part` holds."""
    expected = gold_words(item)
    return len(expected & set(answer_tokens(part))) / len(expected) if expected else 0.0


def gold_words(gold: str) -> set[str]:
    """The gold answer's content words (stemmed); all its tokens when it has only function words."""
    tokens = set(answer_tokens(gold))
    return (tokens - _FACT_STOP_WORDS) or tokens


def carries(gold: str, text: str) -> bool:
    """True when `text` holds every content word of the gold answer (`gold_words`)."""
    expected = gold_words(gold)
    return bool(expected) and expected <= set(answer_tokens(text))
