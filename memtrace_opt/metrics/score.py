"""Category-aware scoring of one prediction against one question, as LoCoMo's upstream evaluation does.

- abstention questions (LoCoMo adversarial, LongMemEval `*_abs`): the right behaviour is to decline;
  F1 and BLEU-1 are 1 if the prediction declines (`metrics.declines.is_decline`) and 0 otherwise;
- multi-hop: comma-separated multi-answer F1;
- open-domain: only the part of the gold before the first ';' counts (upstream does the same);
- everything else: token F1.

`correct_by_rule` is the judge-free verdict of the token rule, named `TOKEN_RULE` wherever results are written
(a run's manifest, a comparison's setting, the optimizer's manifest as its metric, the result tables):
the abstention check for abstention questions; otherwise F1 > 0.5, or every gold content word appears in the
prediction (verbose but right answers; stop words such as "in" or "was" need not, see
`text.words.SCORING_STOP_WORDS`), and never when the prediction declines. The rule reads a numeral and its
number word as the same token ("3 years" is "three years", "2" is "two"; 0 to 20 and the tens), where F1, as
upstream computes it, does not. Its versions (`RULES`; `score_answer(..., rule=...)` scores by an earlier one):

- `token-rule-v1`: the rule above;
- `token-rule-v2`: also right, an answer that names the gold's date in another written form
  (`metrics.dates`: "2031-10-14" or "Tuesday, 14/10/2031" for "14 October 2031", "Oct. 2031" for "October
  2031"), exactly (the parts the gold names, each the same, and no more: "2031-10-01" gives a day "October 2031"
  never gave; no other date) and with the gold's other content words ("the week before ..."); never right,
  an answer that names another date than the gold's (another day, month or year: "15 October 2031" for "14
  October 2031", which F1 accepts), nor a bare number where the gold is that number with a unit ("5" for "5 weeks
  ago"): the score reports that one apart (`bare_number`) instead of letting F1 accept or reject it silently;
- `token-rule-v3`: the verdict does not depend on the form an answer writes a date in. A date of the answer that
  is one of the gold's dates (the same parts) is read, for the lexical test, as the gold writes it
  (`metrics.dates.in_gold_form`): "2031-10-20" for "from 18 October to 20 October 2031" gets the verdict "20
  October 2031" gets. v2's date test reads only an answer naming every date of the gold, so an ISO date for one
  end of a range was wrong where its written form was right by F1. F1 itself is reported as upstream computes it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import dspy

from memtrace_opt.data import Question
from memtrace_opt.metrics.dates import find_dates, in_gold_form, names_dates, other_date, without_dates
from memtrace_opt.metrics.declines import is_decline
from memtrace_opt.metrics.text import answer_tokens, bleu1, content_recall, multi_answer_f1, token_scores
from memtrace_opt.text.words import SCORING_STOP_WORDS

CORRECT_F1 = 0.5
RULES = ("token-rule-v1", "token-rule-v2", "token-rule-v3")
TOKEN_RULE = RULES[-1]  # the rule results are scored by (module doc)

_NUMBER_WORDS = dict(enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split()))
_NUMBER_WORDS.update({10 * n: w for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)})
_NUMERAL = re.compile(r"(?<![.,:/-])\b\d+\b(?![.,:/-]\d)")

# The name scoring used before the decline rule was shared; `is_decline` is the rule.
is_abstention = is_decline


@dataclass(frozen=True)
class AnswerScore:
    """Lexical scores of one prediction: `rule` names how F1 was computed ("f1", "multi-f1", "abstention"),
    `scored_by` the token rule's version that gave `correct_by_rule`; `bare_number`: the prediction is a number
    alone where the gold has that number with a unit (never right, reported apart)."""

    f1: float
    bleu1: float
    recall: float
    abstained: bool
    correct_by_rule: bool
    rule: str
    bare_number: bool = False
    scored_by: str = TOKEN_RULE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnswerScore:
        """A score as `to_dict` wrote it; one written before the rule had versions was scored by the first."""
        return cls(**{k: data[k] for k in ("f1", "bleu1", "recall", "abstained", "correct_by_rule", "rule")},
                   bare_number=bool(data.get("bare_number", False)), scored_by=str(data.get("scored_by", RULES[0])))


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


def _right_as_written(text: str, gold: str, multi_hop: bool, gold_words: str) -> bool:
    """The lexical test of `text`, else of it and `gold` with their numerals spelled ("3 years", "three years")."""
    if _right(_lexical(text, gold, multi_hop), gold_words):
        return True
    spelled, spelled_gold = spell_numbers(text), spell_numbers(gold)
    return (spelled, spelled_gold) != (text, gold) and _right(_lexical(spelled, spelled_gold, multi_hop), gold_words)


GOLD_WORDS = ("content", "all")


def _content_words(text: str) -> set[str]:
    """The stemmed words of `text` less the scoring stop words, numerals spelled; none when only stop words are."""
    return {t for t in answer_tokens(spell_numbers(text)) if t not in SCORING_STOP_WORDS}


class DateTest(NamedTuple):
    """`token-rule-v2`'s reading of the dates of an answer and its gold: whether the answer names the gold's date
    (`names`) or another one (`other`)."""

    names: bool
    other: bool


def date_test(text: str, gold: str) -> DateTest:
    """`names`: `gold` names a date, `text` names it in any written form and no other (`metrics.dates.names_dates`)
    and holds the gold's other content words ("the weekend after" of "the weekend after 14 October 2031");
    `other`: `text` names a date that agrees with none of the gold's (another day, month or year)."""
    gold_dates = find_dates(gold, years=True)
    if not gold_dates:
        return DateTest(False, False)
    dates = find_dates(text)
    if other_date(dates, gold_dates):
        return DateTest(False, True)
    rest = _content_words(without_dates(gold, gold_dates)) <= _content_words(without_dates(text, dates))
    return DateTest(rest and names_dates(dates, gold_dates), False)


def _number(token: str) -> bool:
    return token.isdigit() or token in _NUMBER_WORDS.values()


def bare_number(text: str, gold: str) -> bool:
    """`text` is a number alone and `gold` that number with a unit or more words, and names no date: "5" or
    "five" for "5 weeks ago", not "5 weeks", nor "5" for "5" or for "in 2031"."""
    tokens = answer_tokens(spell_numbers(text), stem=False)
    if len(tokens) != 1 or not _number(tokens[0]) or find_dates(gold, years=True):
        return False
    gold_tokens = answer_tokens(spell_numbers(gold), stem=False)
    return tokens[0] in gold_tokens and any(t not in SCORING_STOP_WORDS and not _number(t) for t in gold_tokens)


def score_answer(question: Question, prediction: str | None, *, gold_words: str = "content",
                 rule: str = TOKEN_RULE) -> AnswerScore:
    """Score `prediction` against `question`'s gold answer according to its category, by the token rule's
    version `rule` (module doc). `gold_words="all"` is the rule before the content-word test (every gold token,
    stop words too), to compare recorded verdicts."""
    if gold_words not in GOLD_WORDS:
        raise ValueError(f"gold_words must be one of {GOLD_WORDS}, not {gold_words!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    text = "" if prediction is None else str(prediction)
    abstained = is_decline(text)
    if question.abstention:
        value = 1.0 if abstained else 0.0
        return AnswerScore(value, value, value, abstained, abstained, "abstention", scored_by=rule)
    gold = question.answer
    if question.category == "open-domain":
        gold = gold.split(";")[0].strip()
    multi_hop = question.category == "multi-hop"
    scores = _lexical(text, gold, multi_hop)
    dated = rule != RULES[0]
    bare = dated and not abstained and bare_number(text, gold)
    dates = date_test(text, gold) if dated and not abstained else DateTest(False, False)
    wrong = abstained or bare or dates.other
    correct = not wrong and _right_as_written(text, gold, multi_hop, gold_words)
    if not correct and not wrong and RULES.index(rule) >= 2:
        form = in_gold_form(text, gold)
        correct = form != text and _right_as_written(form, gold, multi_hop, gold_words)
    correct = correct or dates.names
    return AnswerScore(scores.f1, bleu1(text, gold), scores.recall, abstained, correct,
                       "multi-f1" if multi_hop else "f1", bare, rule)


def score_case(
    question: Question, prediction: str, *, judge: Any | None = None, judge_lm: dspy.LM | None = None
) -> tuple[dict[str, float | None], bool]:
    """Scores (f1, bleu1, judge; `bare_number` 1.0 for a number alone where the gold has a unit, which the token
    rule reports apart) and whether the answer counts as correct.

    Abstention/adversarial questions are scored as the datasets define them (the rule); otherwise the judge's
    verdict decides when there is one, else the token rule (`score_answer`'s correct_by_rule, `TOKEN_RULE`).
    """
    lexical = score_answer(question, prediction)
    judged: bool | None = None
    if judge is not None and not question.abstention:
        with dspy.context(callbacks=[]):  # the judge is not part of the traced program
            judged = judge.judge_question(question, prediction, lm=judge_lm).correct
    correct = lexical.correct_by_rule if judged is None else judged
    scores: dict[str, float | None] = {
        "f1": round(lexical.f1, 4),
        "bleu1": round(lexical.bleu1, 4),
        "judge": None if judged is None else float(judged),
    }
    if lexical.bare_number:
        scores["bare_number"] = 1.0
    return scores, bool(correct)
