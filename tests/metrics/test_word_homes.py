"""One home for each word list: the calendar's names (months, weekdays, days said relative to today) are written
only in `text.words`, and the abstaining answer only in `data` (`ABSTAIN_ANSWER`); every other module of the
package reads them from there. Docstrings may name them (they explain); code may not list them again.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from memtrace_opt.data import ABSTAIN_ANSWER
from memtrace_opt.text.words import MONTHS, RELATIVE_DAYS, WEEKDAYS
from tests.sources import ROOT, docstring_ids, package_sources

WORD_HOME = Path("memtrace_opt/text/words.py")
ABSTAIN_HOME = Path("memtrace_opt/data/_types.py")
LISTS = {"months": frozenset(MONTHS), "weekdays": frozenset(WEEKDAYS), "relative days": frozenset(RELATIVE_DAYS)}
A_LIST = 3  # this many names of one list in one literal is a copy of the list
_WORD = re.compile(r"[a-z]+")


def literals(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal of `source` but docstrings, a tuple, list or set of strings read as
    one text (a list of names written one string each)."""
    tree = ast.parse(source)
    docstrings = docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if parts:
                yield node.lineno, " ".join(parts)


def copies(source: str, where: Path) -> list[str]:
    """What `source` writes again of the word lists and the abstaining answer."""
    found = []
    for line, text in sorted(literals(source)):
        words = set(_WORD.findall(text.lower()))
        if where != WORD_HOME:
            found += [f"{where}:{line}: {name}" for name, names in LISTS.items() if len(words & names) >= A_LIST]
        if where != ABSTAIN_HOME and text.strip().lower() == ABSTAIN_ANSWER.lower():
            found.append(f"{where}:{line}: the abstaining answer")
    return found


def test_the_finder_sees_a_list_written_again_and_spares_docstrings() -> None:
    planted = '''"""Dates such as "last Monday", "Tuesday" or "Friday" are read here."""
_DAYS = ("monday", "tuesday", "wednesday")
_SHIFT = re.compile(r"\\b(yesterday|today|tomorrow)\\b")
ANSWER = "Not mentioned in the conversation"
_ONE = "in May or June"
'''
    assert copies(planted, Path("programs/x.py")) == ["programs/x.py:2: weekdays", "programs/x.py:3: relative days",
                                                      "programs/x.py:4: the abstaining answer"]
    assert copies(planted, WORD_HOME) == ["memtrace_opt/text/words.py:4: the abstaining answer"]


def test_the_calendar_words_and_the_abstaining_answer_have_one_home() -> None:
    sources = list(package_sources())
    assert len(sources) > 100
    found = [hit for path in sources for hit in copies(path.read_text(encoding="utf-8"), path.relative_to(ROOT))]
    assert found == []
