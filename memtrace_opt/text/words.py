"""The word lists that decide which words of a text carry its content: one per purpose, all in this module.

Which words count decides whether a text "holds the answer", so a list is chosen by what the test is for:

- `SCORING_STOP_WORDS`: words a correct answer may leave out of the gold answer (the token rule's "every gold
  content word" test, `metrics.text.content_recall`). Small on purpose: negations, pronouns, numbers and
  "before"/"after" change what an answer says ("not in the office", "her mother", "after June").
- `FACT_STOP_WORDS`: words that carry no fact, for "does this text still carry the information": attribution's
  `NeededInfo` (the gold's, the evidence turns' and the outputs' content words), the local check of the
  optimizer (which calls `NeededInfo.holds`, and reads the same words where a case has no question), and BM25
  search (`memory.index.tokenize`), so pseudo-evidence is ranked on the words the test reads.
- `FUNCTION_WORDS`: every function word of the lists above plus the modals, conjunctions and question words: a
  capitalised one starts a sentence and names no one (the reflective source's test for the cases' names).
- `PERSONAL_PRONOUNS`, `RELATIVE_TIME_WORDS`, `CALENDAR_WORDS`: how a fact refers to a person or a date without
  naming it ("she", "two days ago") and the words of an absolute date (months, weekdays): attribution's test of a
  fact written with a pronoun or a relative date (`NeededInfo.written`).
- `MONTHS`, `MONTH_NUMBERS`, `WEEKDAYS`, `RELATIVE_DAYS`: the calendar's names in order, for every module that reads
  or writes a date (scoring's date forms, `metrics.dates`; the programs' relative-date hints; the optimizer's date
  patterns and its reflection filter; the fake LM); `CALENDAR_WORDS` and `RELATIVE_TIME_WORDS` are made of them.
- `english_words()`: the whole English words of the vocabulary the package ships for its embedder (uncased
  WordPiece, about 22,000 words): what the gold revision reads as a word, not two glued ones (`data.gold`).
- `CHAT_STOP_WORDS`: the fake LM's reading of chat text (`testing.skills`): `FACT_STOP_WORDS` plus chat filler
  ("oh", "yeah", "thanks"), contractions written without their apostrophe, and vague words ("thing", "lot").

The lists hold lower-case, unstemmed words; a caller that stems its tokens stems the list the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

__all__ = ["CALENDAR_WORDS", "CHAT_STOP_WORDS", "FACT_STOP_WORDS", "FUNCTION_WORDS", "MONTHS", "MONTH_NUMBERS",
           "PERSONAL_PRONOUNS", "RELATIVE_DAYS", "RELATIVE_TIME_WORDS", "SCORING_STOP_WORDS", "WEEKDAYS",
           "english_words"]

#: Function words an answer can leave out and still say the same: prepositions of place and relation, copulas
#: and auxiliaries, demonstratives.
SCORING_STOP_WORDS = frozenset(
    "in on at of to for from by with into onto as is are was were be been being am do does did has have had or "
    "so this that these those it its there which who".split()
)

#: Words that carry no fact: articles, "and"/"or", the commonest prepositions, copulas and auxiliaries, personal
#: pronouns and possessives, demonstratives, question words.
FACT_STOP_WORDS = frozenset(
    "a an the and or of to in on at for with is was are were be been it its this that i you he she we they my "
    "your his her our their me him them do did does have has had what when where who which how".split()
)

#: Any function word: the two lists above, modals, conjunctions, the other question words and pronouns.
FUNCTION_WORDS = SCORING_STOP_WORDS | FACT_STOP_WORDS | frozenset(
    "am being us will would shall should can could may might must but if so than then also very not no whom whose "
    "why here there about after before over".split()
)

#: Personal pronouns and possessives: a fact that says "she" where the conversation named the person.
PERSONAL_PRONOUNS = frozenset(
    "i me my mine myself you your yours yourself he him his himself she her hers herself we us our ours ourselves "
    "they them their theirs themselves".split()
)

#: Month names in calendar order: a month's number is its index plus one.
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")

#: Every name of a month, full or abbreviated ("sep" and "sept"), to its number.
MONTH_NUMBERS: Mapping[str, int] = MappingProxyType(
    {**{name: i for i, name in enumerate(MONTHS, 1)},
     **{name[:3]: i for i, name in enumerate(MONTHS, 1)}, "sept": 9}
)

#: Weekday names in the order of `datetime.date.weekday()` (Monday is 0).
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

#: A day named relative to the day it is said on.
RELATIVE_DAYS = ("yesterday", "today", "tonight", "tomorrow")

#: Words of a date said relative to when it was said ("yesterday", "two days ago", "last week").
RELATIVE_TIME_WORDS = frozenset(RELATIVE_DAYS) | frozenset(
    "ago recently lately earlier later last next previous past coming".split()
)

#: Month and weekday names: the words of an absolute date besides its numbers.
CALENDAR_WORDS = frozenset(MONTH_NUMBERS) | frozenset(WEEKDAYS)

#: The fake LM's non-content words of chat text.
CHAT_STOP_WORDS = FACT_STOP_WORDS | frozenset(
    """but from by as am being these those us whom why done so very really just too also not no yes if then than
    there here about into over out up down off all any some much many more most can could would should will shall
    may might must let lets im ive id youre thats theres dont didnt doesnt isnt wasnt arent got get gets going gonna
    s t re ve ll d oh hey hi wow ha yeah yep ok okay thanks thank great good nice cool awesome lot lots
    one ones thing things kind pretty well still even way now already own name named near around
    across through after before during since until while because though""".split()
)


@cache
def english_words() -> frozenset[str]:
    """The whole words of letters in the embedder's vocabulary (`embed.VOCAB_FILE`), lower case: no word piece
    ("##ing"), no marker ("[CLS]"), no number."""
    from memtrace_opt.embed import VOCAB_FILE

    lines = VOCAB_FILE.read_text(encoding="utf-8").split()
    return frozenset(line for line in lines if line.isalpha() and line.isascii())
