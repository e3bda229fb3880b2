"""A JSON list that repeats an item is cut before the repeat and closed."""

from __future__ import annotations

import json

from memtrace_opt.lm.repeat_guard import RepeatGuard, top_level_items


def test_items_are_split_at_top_level_commas_only():
    value = '["a, b", "say \\"hi\\", then go", {"x": [1, 2], "y": "}"}, 3, '
    spans, closed = top_level_items(value)
    assert [value[s:e] for s, e in spans] == ['"a, b"', '"say \\"hi\\", then go"', '{"x": [1, 2], "y": "}"}', "3"]
    assert not closed
    assert top_level_items('["a", "b"]')[1] is True
    assert top_level_items("no list here") == ([], False)


def test_a_repeated_fact_ends_the_list_before_it():
    guard = RepeatGuard(frozenset({"facts"}))
    head = "[[ ## facts ## ]]\n"
    looping = head + '["Theo booked a trip.", "Maya runs.", "Maya runs.", "Maya runs.", "Ma'
    cut = guard.cut(looping)
    assert cut == head + '["Theo booked a trip.", "Maya runs."]'
    assert json.loads(cut[len(head):]) == ["Theo booked a trip.", "Maya runs."]
    assert guard.repeats == 1


def test_nothing_is_cut_while_items_differ_or_once_the_list_closed():
    guard = RepeatGuard(frozenset({"facts"}))
    head = "[[ ## facts ## ]]\n"
    assert guard.cut(head + '["a", "b", "c", ') is None
    assert guard.cut(head + '["a", "a"]') is None  # closed: the adapter parses it as it is
    assert guard.cut("[[ ## answer ## ]]\n[\"a\", \"a\", ") is None  # not a list field
    assert guard.repeats == 0


def test_repeated_objects_are_caught_too():
    guard = RepeatGuard(frozenset({"memory_actions"}))
    head = "[[ ## memory_actions ## ]]\n"
    item = '{"event": "ADD", "id": "", "text": "x"}'
    cut = guard.cut(head + f'[{item}, {{"event": "NONE", "id": "1", "text": "y"}}, {item}, ')
    assert cut is not None and json.loads(cut[len(head):])[-1]["event"] == "NONE"
