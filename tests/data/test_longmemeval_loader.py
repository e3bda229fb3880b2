"""LongMemEval loader against the real oracle file, and the S-format details on a small record."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memtrace_opt.data import Dataset, load_dataset, load_longmemeval
from memtrace_opt.errors import DatasetError


def test_counts_match_the_oracle_file(longmemeval: Dataset) -> None:
    stats = longmemeval.stats()
    assert (stats.conversations, stats.questions) == (500, 500)
    assert (stats.sessions, stats.turns) == (948, 10960)
    assert stats.questions_by_category == {
        "single-session-user": 70,
        "single-session-assistant": 56,
        "single-session-preference": 30,
        "multi-session": 133,
        "knowledge-update": 78,
        "temporal-reasoning": 133,
    }
    assert stats.abstention_questions == 30
    assert all(q.question_id.endswith("_abs") for _, q in longmemeval.questions() if q.abstention)


def test_integer_answers_become_strings(longmemeval: Dataset, longmemeval_path: Path) -> None:
    raw = json.loads(longmemeval_path.read_text(encoding="utf-8"))
    integers = {r["question_id"]: r["answer"] for r in raw if isinstance(r["answer"], int)}
    assert len(integers) == 32
    for conversation, q in longmemeval.questions():
        assert isinstance(q.answer, str)
        if conversation.sample_id in integers:
            assert q.answer == str(integers[conversation.sample_id])


def test_has_answer_turns_are_the_evidence(longmemeval: Dataset) -> None:
    evidence = [e for _, q in longmemeval.questions() for e in q.evidence]
    assert len(evidence) == 896
    assert sum(1 for _, q in longmemeval.questions() if not q.evidence) == 21
    for conversation, q in longmemeval.questions():
        assert all(conversation.has_turn(e) for e in q.evidence)
        assert q.question_date is not None and q.category_id is None


def test_sessions_are_chronological_and_keep_their_ids(longmemeval: Dataset, longmemeval_path: Path) -> None:
    raw = {r["question_id"]: r for r in json.loads(longmemeval_path.read_text(encoding="utf-8"))}
    reordered = 0
    for conversation in longmemeval.conversations:
        dates = [s.date_time or "" for s in conversation.sessions]
        assert dates == sorted(dates)
        assert [s.index for s in conversation.sessions] == list(range(1, len(dates) + 1))
        record = raw[conversation.sample_id]
        assert Counter(s.session_id for s in conversation.sessions) == Counter(record["haystack_session_ids"])
        reordered += [s.session_id for s in conversation.sessions] != record["haystack_session_ids"]
    assert reordered > 0  # the oracle file lists some histories out of date order


def test_s_format_record(write_json, make_longmemeval_record) -> None:
    records = [make_longmemeval_record("q1"), make_longmemeval_record("q2_abs")]
    path = write_json("longmemeval_s_small.json", records)
    dataset = load_dataset(path)
    assert dataset.name == "longmemeval"
    conversation = dataset.conversation("q1")
    assert conversation.speakers == ("user", "assistant") and conversation.dataset == "longmemeval"
    assert [s.session_id for s in conversation.sessions] == ["earlier", "later"]
    assert conversation.turn("D2:1").text == "My dog Rex loves the park."
    assert conversation.turn("D2:2").speaker == "assistant"
    assert conversation.turn("D2:1").timestamp == "2023/05/20 (Sat) 09:00"
    (q,) = conversation.questions
    assert q.evidence == () and not q.abstention and q.category == "single-session-user"
    assert dataset.conversation("q2_abs").questions[0].abstention


def test_has_answer_marks_evidence_in_a_small_record(write_json, make_longmemeval_record) -> None:
    record = make_longmemeval_record()
    record["haystack_sessions"][0][0]["has_answer"] = True
    dataset = load_longmemeval(write_json("lme.json", [record]))
    assert dataset.conversations[0].questions[0].evidence == ("D2:1",)


def test_answer_session_ids_mark_their_sessions(write_json, make_longmemeval_record) -> None:
    """An abstention question marks no turn as evidence: its answer sessions are still known (the splits keep
    it beside a question that holds the same session)."""
    record = make_longmemeval_record("q3_abs")
    dataset = load_longmemeval(write_json("lme.json", [record]))
    sessions = dataset.conversations[0].sessions
    assert [(s.session_id, s.answer_session) for s in sessions] == [("earlier", False), ("later", True)]
    unnamed = load_longmemeval(write_json("none.json", [{**record, "answer_session_ids": None}]))
    assert not any(s.answer_session for s in unnamed.conversations[0].sessions)


def test_answer_session_ids_that_are_not_a_list_name_the_record(write_json, make_longmemeval_record) -> None:
    with pytest.raises(DatasetError, match="q4.*answer_session_ids is a string, not a list"):
        load_longmemeval(write_json("bad.json", [{**make_longmemeval_record("q4"), "answer_session_ids": "later"}]))
