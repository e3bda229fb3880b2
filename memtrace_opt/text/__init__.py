"""Text below every other package: the word lists (months, weekdays, relative days, stop and function words, the
English vocabulary) and the Porter stemmer. The data loaders, the metrics, the memory index and the optimizer all
read them from here, one definition each."""

from memtrace_opt.text.porter import porter_stem
from memtrace_opt.text.words import (
    CHAT_STOP_WORDS,
    FACT_STOP_WORDS,
    FUNCTION_WORDS,
    MONTH_NUMBERS,
    MONTHS,
    RELATIVE_DAYS,
    SCORING_STOP_WORDS,
    WEEKDAYS,
    english_words,
)

__all__ = ["CHAT_STOP_WORDS", "FACT_STOP_WORDS", "FUNCTION_WORDS", "MONTHS", "MONTH_NUMBERS", "RELATIVE_DAYS",
           "SCORING_STOP_WORDS", "WEEKDAYS", "english_words", "porter_stem"]
