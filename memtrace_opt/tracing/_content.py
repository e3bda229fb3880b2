"""Content lineage: which turns and memory units an op's plain-string values contain.

An op that takes a session as one `str` (or returns notes as strings) hides its flow from the typed refs.
`ContentIndex` finds the texts of turns and unit versions again inside such strings, so the builder can link
them (edges marked `via: "content"`). Matching is on word tokens (lower-cased `\\w+` runs), so whitespace,
punctuation and case changes around or inside a copied text do not hide it; a text must have at least
`MIN_TOKENS` tokens to be indexed (shorter ones would match by chance).

Cost is bounded: each string is tokenized once, its 4-token windows are intersected (as a set) with the
indexed texts' first `ANCHOR` tokens, and only texts sharing an anchor are confirmed by a substring search of
the joined tokens. Private to the tracing package.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

__all__ = ["ContentIndex", "strings_in", "tokens", "MIN_TOKENS"]

MIN_TOKENS = 4
ANCHOR = 4
_MIN_CHARS = 16
_TOKEN = re.compile(r"\w+")
_REF_KEYS = ("$mem", "$turn", "$question")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def strings_in(value: Any) -> Iterator[str]:
    """The string leaves of a JSON value that could hold an indexed text (long enough, with a space), outside
    unit/turn/question refs (those are linked through their nodes already)."""
    kind = type(value)
    if kind is str:
        if len(value) >= _MIN_CHARS and " " in value:  # not an identifier (a state's fingerprint)
            yield value
    elif kind is list:
        for item in value:
            yield from strings_in(item)
    elif kind is dict:
        if "$mem" in value or "$turn" in value or "$question" in value:
            return
        for item in value.values():
            yield from strings_in(item)


class ContentIndex:
    """Texts by node, found again inside other strings. `add` / `remove` keep it current as units change."""

    def __init__(self) -> None:
        self._anchors: dict[tuple[str, ...], dict[tuple[str, ...], list[str]]] = {}
        self._key_of: dict[str, tuple[str, ...]] = {}
        self.group: dict[str, Any] = {}  # node -> its group (a turn's session), to choose among equal texts
        self.generation = 0
        self._cache: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._todo: list[tuple[str, Any, Any]] = []  # adds (text) and removes (text None), applied on `find`

    def __bool__(self) -> bool:
        return bool(self._key_of) or bool(self._todo)

    def add(self, node: str, text: Any, group: Any = None) -> None:
        """Index `node`'s text (ignored when it is too short to match safely). Tokenized only once a `find`
        needs it: a run whose ops pass typed values never pays for the index."""
        if isinstance(text, str) and len(text) >= _MIN_CHARS // 2:
            self._todo.append((node, text, group))

    def remove(self, node: str) -> None:
        self._todo.append((node, None, None))

    def _apply(self) -> None:
        for node, text, group in self._todo:
            self._remove(node)
            if text is None:
                continue
            key = tuple(tokens(text))
            if len(key) < MIN_TOKENS:
                continue
            self._anchors.setdefault(key[:ANCHOR], {}).setdefault(key, []).append(node)
            self._key_of[node] = key
            if group is not None:
                self.group[node] = group
        self._todo.clear()
        self.generation += 1

    def _remove(self, node: str) -> None:
        key = self._key_of.pop(node, None)
        if key is None:
            return
        texts = self._anchors[key[:ANCHOR]]
        nodes = texts[key]
        nodes.remove(node)
        if not nodes:
            del texts[key]
            if not texts:
                del self._anchors[key[:ANCHOR]]

    def find(self, text: str) -> tuple[str, ...]:
        """The nodes whose text occurs in `text`, in order of first occurrence. Where several nodes share one
        text, those in the group most of the uniquely matched nodes belong to (the same session) are kept."""
        if self._todo:
            self._apply()
        cached = self._cache.get(text)
        if cached is not None and cached[0] == self.generation:
            return cached[1]
        words = tokens(text)
        found: list[tuple[int, tuple[str, ...]]] = []
        anchors = self._anchors
        if len(words) >= MIN_TOKENS:
            hits = set(zip(words, words[1:], words[2:], words[3:], strict=False)) & anchors.keys()  # ANCHOR == 4
            if hits:
                joined = f" {' '.join(words)} "
                for anchor in hits:
                    for key in anchors[anchor]:
                        at = joined.find(f" {' '.join(key)} ")
                        if at >= 0:
                            found.append((at, key))
                found.sort()
        result = self._resolve([anchors[key[:ANCHOR]][key] for _, key in found])
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[text] = (self.generation, result)
        return result

    def _resolve(self, matches: list[list[str]]) -> tuple[str, ...]:
        if all(len(nodes) == 1 for nodes in matches):
            return tuple(dict.fromkeys(nodes[0] for nodes in matches))
        counts = Counter(self.group.get(nodes[0]) for nodes in matches if len(nodes) == 1)
        counts.pop(None, None)
        usual = min(counts, key=lambda g: (-counts[g], repr(g))) if counts else None
        out: list[str] = []
        for nodes in matches:
            if len(nodes) > 1 and usual is not None:
                kept = [n for n in nodes if self.group.get(n) == usual]
                out.extend(kept or nodes)
            else:
                out.extend(nodes)
        return tuple(dict.fromkeys(out))
