"""Category-aware scoring of one prediction against one question, as LoCoMo's upstream evaluation does.

- abstention questions (LoCoMo adversarial, LongMemEval `*_abs`): the right behaviour is to decline;
  F1 and BLEU-1 are 1 if the prediction declines (`metrics.declines.is_decline`) and 0 otherwise;
- multi-hop: comma-separated multi-answer F1;
- open-domain: only the part of the gold before the first ';' counts (upstream does the same);
- everything else: token F1.
`correct_by_rule` is the judge-free verdict: the abstention check for abstention questions; otherwise
F1 > 0.5, or every gold content word appears in the prediction (verbose but right answers; stop words
such as "in" or "was" need not, see `metrics.words.SCORING_STOP_WORDS`), and never when the prediction declines.
The rule reads a numeral and its number word as the same token ("3 years" is
"three years", "2" is "two"; 0 to 20 and the tens), where F1, as upstream computes it, does not.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from memtrace_opt.data import Question
from memtrace_opt.metrics.declines import is_decline
from memtrace_opt.metrics.text import bleu1, content_recall, multi_answer_f1, token_scores

CORRECT_F1 = 0.5

_NUMBER_WORDS = dict(enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split()))
_NUMBER_WORDS.update({10 * n: w for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)})
_NUMERAL = re.compile(r"(?<![.,:/-])\b\d+\b(?![.,:/-]\d)")

# The name scoring used before the decline rule was shared; `is_decline` is the rule.
is_abstention = is_decline


@dataclass(frozen=True)
class AnswerScore:
    """Lexical scores of one prediction; `rule` names how they were computed."""

    f1: float
    bleu1: float
    recall: float
    abstained: bool
    correct_by_rule: bool
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerScore:
        return cls(**{k: data[k] for k in ("f1", "bleu1", "recall", "abstained", "correct_by_rule", "rule")})


def spell_numbers(text: str) -> str:
    """Numerals that have a common number word, spelled out: "3 years" -> "three years" (not "2019", "3.5", "9:30")."""
    return _NUMERAL.sub(lambda m: _NUMBER_WORDS.get(int(m.group()), m.group()), text)


class _Lexical(NamedTuple):
    f1: float
    recall: float  # of every gold token, as recorded
    content: float  # of the gold's content words: the rule's "every gold word" test


def _lexical(text: str, gold: str, multi_hop: bool) -> _Lexical:
    """F1 and recalls of `text` against `gold`: multi-hop's per-part scores (the weakest part's recall), else
    token F1."""
    if multi_hop:
        parts = [g.strip() for g in gold.split(",")]
        return _Lexical(multi_answer_f1(text, gold), min(token_scores(text, part).recall for part in parts),
                        min(content_recall(text, part) for part in parts))
    scores = token_scores(text, gold)
    return _Lexical(scores.f1, scores.recall, content_recall(text, gold))


def _right(scores: _Lexical, gold_words: str) -> bool:
    return scores.f1 > CORRECT_F1 or (scores.content if gold_words == "content" else scores.recall) == 1.0


GOLD_WORDS = ("content", "all")


def score_answer(question: Question, prediction: str | None, *, gold_words: str = "content") -> AnswerScore:
    """Score `prediction` against `question`'s gold answer according to its category. `gold_words="all"` is
    the rule before the content-word test (every gold token, stop words too), to compare recorded verdicts."""
    if gold_words not in GOLD_WORDS:
        raise ValueError(f"gold_words must be one of {GOLD_WORDS}, not {gold_words!r}")
    text = "" if prediction is None else str(prediction)
    abstained = is_decline(text)
    if question.abstention:
        value = 1.0 if abstained else 0.0
        return AnswerScore(value, value, value, abstained, abstained, "abstention")
    gold = question.answer
    if question.category == "open-domain":
        gold = gold.split(";")[0].strip()
    multi_hop = question.category == "multi-hop"
    scores = _lexical(text, gold, multi_hop)
    rule = "multi-f1" if multi_hop else "f1"
    correct = not abstained and _right(scores, gold_words)
    spelled, spelled_gold = spell_numbers(text), spell_numbers(gold)
    if not correct and not abstained and (spelled, spelled_gold) != (text, gold):
        correct = _right(_lexical(spelled, spelled_gold, multi_hop), gold_words)
    return AnswerScore(scores.f1, bleu1(text, gold), scores.recall, abstained, correct, rule)
