"""Stop a JSON list that starts repeating itself, and close it.

A small model writing a list of facts or actions sometimes falls into a loop: the same item again and again until
the token limit, which costs the whole limit in decode time and leaves a reply that does not parse. An item
written verbatim a second time adds nothing to a list, so `RepeatGuard` watches a ChatAdapter reply as it is
decoded and, when a top-level item of a JSON list field repeats an earlier item of that list, says where to cut:
the list keeps its items up to the repeat and is closed there. What comes after (later fields, the completed
marker) is decoded again by the caller, or, for the last field, written as the adapter expects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["RepeatGuard", "top_level_items"]

_MARKER = re.compile(r"\[\[ ## (\w+) ## \]\]\n")


def top_level_items(value: str) -> tuple[list[tuple[int, int]], bool]:
    """Spans (start, end) of the complete top-level items of the JSON array `value` opens, and whether it closed.

    Tolerant of a value still being written: an unfinished last item is not returned. Not an array: ([], False).
    """
    start = value.find("[")
    if start < 0 or value[:start].strip():
        return [], False
    spans: list[tuple[int, int]] = []
    depth, in_string, escaped = 0, False, False
    item_start: int | None = None
    for i in range(start, len(value)):
        ch = value[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
            if depth == 1 and item_start is None:
                item_start = i
        elif ch in "[{":
            depth += 1
            if depth == 2 and item_start is None:
                item_start = i
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                if item_start is not None:
                    spans.append((item_start, i))
                return _trimmed(value, spans), True
        elif ch == "," and depth == 1:
            if item_start is not None:
                spans.append((item_start, i))
            item_start = None
        elif depth == 1 and item_start is None and not ch.isspace():
            item_start = i  # a number, true, false or null
    return _trimmed(value, spans), False


def _trimmed(value: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for start, end in spans:
        while end > start and value[end - 1].isspace():
            end -= 1
        out.append((start, end))
    return out


@dataclass
class RepeatGuard:
    """Watches a reply whose `list_fields` are JSON lists; `cut(text)` says where a repeat ends the list."""

    list_fields: frozenset[str]
    repeats: int = field(default=0)

    def cut(self, text: str) -> str | None:
        """`text` closed before its current list's first repeated item, or None while nothing repeats."""
        marks = list(_MARKER.finditer(text))
        if not marks or marks[-1].group(1) not in self.list_fields:
            return None
        body_at = marks[-1].end()
        spans, closed = top_level_items(text[body_at:])
        if closed or len(spans) < 2:
            return None
        seen = set()
        for index, (start, end) in enumerate(spans):
            item = text[body_at + start : body_at + end]
            if item in seen:
                self.repeats += 1
                keep_end = body_at + spans[index - 1][1]
                return text[:keep_end] + "]"
            seen.add(item)
        return None
