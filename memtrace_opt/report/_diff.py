"""Word-level diff of two instructions, as (op, text) pieces and as escaped HTML."""

from __future__ import annotations

import difflib
import html
import re
from typing import Literal

__all__ = ["DiffPiece", "word_diff", "word_diff_html"]

DiffPiece = tuple[Literal["equal", "insert", "delete"], str]
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


def word_diff(old: str, new: str) -> list[DiffPiece]:
    """The pieces that turn `old` into `new`, word by word (whitespace and punctuation are tokens too).
    Joining the "equal" and "delete" pieces gives `old`; joining "equal" and "insert" gives `new`."""
    a, b = _TOKEN.findall(old or ""), _TOKEN.findall(new or "")
    pieces: list[DiffPiece] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            pieces.append(("equal", "".join(a[i1:i2])))
            continue
        if tag in ("delete", "replace"):
            pieces.append(("delete", "".join(a[i1:i2])))
        if tag in ("insert", "replace"):
            pieces.append(("insert", "".join(b[j1:j2])))
    return pieces


def word_diff_html(old: str, new: str) -> str:
    """`<del>`/`<ins>` markup of `word_diff`, every piece HTML-escaped (safe to put in a page as is)."""
    out = []
    for op, text in word_diff(old, new):
        escaped = html.escape(text)
        if op == "equal":
            out.append(escaped)
        elif op == "delete":
            out.append(f'<del class="diff-del">{escaped}</del>')
        else:
            out.append(f'<ins class="diff-ins">{escaped}</ins>')
    return "".join(out)
