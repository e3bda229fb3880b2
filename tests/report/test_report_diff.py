"""The word diff of an accepted instruction."""

from __future__ import annotations

from memtrace_opt.report import word_diff, word_diff_html


def test_pieces_rebuild_both_texts() -> None:
    old = "Decide one action per fact: ADD, UPDATE, DELETE or NONE."
    new = "Decide one action per fact: ADD, UPDATE or NONE. DELETE only on a contradiction."
    pieces = word_diff(old, new)
    assert "".join(t for op, t in pieces if op != "insert") == old
    assert "".join(t for op, t in pieces if op != "delete") == new
    assert ("delete", ", DELETE") in pieces or any(op == "delete" and "DELETE" in t for op, t in pieces)
    assert any(op == "insert" and "contradiction" in t for op, t in pieces)


def test_html_marks_changes_and_escapes_everything() -> None:
    html = word_diff_html("Use <b>bold</b> & keep", "Use <script>alert(1)</script> & keep")
    assert "<script" not in html and "<b>" not in html
    assert '<ins class="diff-ins">script</ins>' in html and '<del class="diff-del">b</del>' in html
    assert html.startswith("Use &lt;") and html.endswith("&gt; &amp; keep")


def test_identical_texts_have_no_changes() -> None:
    assert word_diff_html("same text", "same text") == "same text"
    assert word_diff("", "") == []
