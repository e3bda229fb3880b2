"""The Porter (1980) suffix-stripping stemmer, with the small extensions NLTK applies by default.

LoCoMo's upstream token F1 stems with `nltk.stem.PorterStemmer()` (NLTK_EXTENSIONS mode); this is an
independent implementation of that behaviour so scores match upstream without depending on nltk.
Input is expected lower-cased (the answer normalizer does that).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

_VOWELS = frozenset("aeiou")
_IRREGULAR = {
    "skies": "sky",
    "sky": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}

Condition = Callable[[str], bool] | None


def _consonant(word: str, i: int) -> bool:
    char = word[i]
    if char in _VOWELS:
        return False
    if char == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]: the number of vowel-consonant runs."""
    pattern = "".join("c" if _consonant(stem, i) else "v" for i in range(len(stem)))
    return pattern.count("vc")


def _positive(stem: str) -> bool:
    return _measure(stem) > 0


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """*o: ends consonant-vowel-consonant, the last not w, x or y (or a two-letter vowel-consonant word)."""
    n = len(word)
    if n >= 3:
        return (
            _consonant(word, n - 3)
            and not _consonant(word, n - 2)
            and _consonant(word, n - 1)
            and word[-1] not in "wxy"
        )
    return n == 2 and not _consonant(word, 0) and _consonant(word, 1)


def _rules(word: str, rules: list[tuple[str, str, Condition]]) -> str:
    """Apply the first rule whose suffix matches; if its condition fails, leave the word alone."""
    for suffix, replacement, condition in rules:
        if suffix == "*d":
            if _double_consonant(word):
                stem = word[:-2]
                return stem + replacement if condition is None or condition(stem) else word
            continue
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _rules(word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    last = stem[-1]
    return _rules(
        stem,
        [
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", last, lambda _: last not in "lsz"),
            ("", "e", lambda s: _measure(s) == 1 and _cvc(s)),
        ],
    )


def _step1c(word: str) -> str:
    return _rules(word, [("y", "i", lambda s: len(s) > 1 and _consonant(s, len(s) - 1))])


def _step2(word: str) -> str:
    if word.endswith("alli") and _positive(word[:-4]):
        return _step2(word[:-4] + "al")
    return _rules(
        word,
        [
            ("ational", "ate", _positive),
            ("tional", "tion", _positive),
            ("enci", "ence", _positive),
            ("anci", "ance", _positive),
            ("izer", "ize", _positive),
            ("bli", "ble", _positive),
            ("alli", "al", _positive),
            ("entli", "ent", _positive),
            ("eli", "e", _positive),
            ("ousli", "ous", _positive),
            ("ization", "ize", _positive),
            ("ation", "ate", _positive),
            ("ator", "ate", _positive),
            ("alism", "al", _positive),
            ("iveness", "ive", _positive),
            ("fulness", "ful", _positive),
            ("ousness", "ous", _positive),
            ("aliti", "al", _positive),
            ("iviti", "ive", _positive),
            ("biliti", "ble", _positive),
            ("fulli", "ful", _positive),
            ("logi", "log", lambda _: _positive(word[:-3])),
        ],
    )


def _step3(word: str) -> str:
    return _rules(
        word,
        [
            ("icate", "ic", _positive),
            ("ative", "", _positive),
            ("alize", "al", _positive),
            ("iciti", "ic", _positive),
            ("ical", "ic", _positive),
            ("ful", "", _positive),
            ("ness", "", _positive),
        ],
    )


def _step4(word: str) -> str:
    def big(stem: str) -> bool:
        return _measure(stem) > 1

    suffixes = ["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent"]
    rules: list[tuple[str, str, Condition]] = [(s, "", big) for s in suffixes]
    rules.append(("ion", "", lambda s: big(s) and s[-1:] in ("s", "t")))
    rules += [(s, "", big) for s in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")]
    return _rules(word, rules)


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return _rules(word, [("ll", "l", lambda _: _measure(word[:-1]) > 1)])


@lru_cache(maxsize=65536)
def porter_stem(word: str) -> str:
    """The stem of one lower-case word ("running" -> "run", "happily" -> "happili")."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 2:
        return word
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        word = step(word)
    return word
