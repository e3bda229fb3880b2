"""Loader for LongMemEval files (Wu et al., ICLR 2025): the oracle split and the S/M haystack format.

Each LongMemEval record is one question with its own chat history, so each becomes one Conversation
(`sample_id` = `question_id`) holding that single question. Sessions are put in chronological order
of `haystack_dates` (the file does not always list them that way; a memory system must see them in
time order), numbered from 1 in that order; turn ids are synthesized as "D{n}:{i}" (i from 1) so they
look like LoCoMo's, and each Session keeps its original `haystack_session_ids` entry as `session_id` (and is an
`answer_session` when `answer_session_ids` names it). Turns marked `has_answer` are the question's evidence. Question ids ending in `_abs` are abstention
questions. Integer answers are converted to strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memtrace_opt.data._io import read_json, record_error, require_list, type_name
from memtrace_opt.data._types import Conversation, Dataset, Question, Session, Turn

SPEAKERS = ("user", "assistant")
_REQUIRED = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
)


def is_longmemeval(data: Any) -> bool:
    """Whether parsed JSON looks like a LongMemEval file (a list of records with `haystack_sessions`)."""
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], dict)
        and "haystack_sessions" in data[0]
        and "question_id" in data[0]
    )


def load_longmemeval(path: str | Path, name: str = "longmemeval") -> Dataset:
    """Load a LongMemEval JSON file. Raises DatasetError naming the file and record on bad input."""
    file = Path(path)
    records = require_list(file, read_json(file), "LongMemEval")
    return parse_longmemeval(records, file, name=name)


def parse_longmemeval(records: list[Any], file: Path, name: str = "longmemeval") -> Dataset:
    """Build a Dataset from already-parsed LongMemEval records; `file` is only used in messages."""
    conversations = []
    seen: set[str] = set()
    for index, record in enumerate(records):
        conversation = _parse_record(record, index, file)
        if conversation.sample_id in seen:
            raise record_error(file, index, conversation.sample_id, "duplicate question_id")
        seen.add(conversation.sample_id)
        conversations.append(conversation)
    return Dataset(name=name, path=str(file), conversations=tuple(conversations))


def _parse_record(record: Any, index: int, file: Path) -> Conversation:
    if not isinstance(record, dict):
        raise record_error(file, index, None, f"expected an object, got {type_name(record)}")
    raw_id = record.get("question_id")
    record_id = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
    for key in _REQUIRED:
        if key not in record or record[key] is None:
            raise record_error(file, index, record_id, f"missing key '{key}'")
    assert record_id is not None
    question_id = record_id

    def fail(message: str) -> Exception:
        return record_error(file, index, question_id, message)

    dates, ids, raw_sessions = (
        record["haystack_dates"],
        record["haystack_session_ids"],
        record["haystack_sessions"],
    )
    for key, value in (
        ("haystack_dates", dates),
        ("haystack_session_ids", ids),
        ("haystack_sessions", raw_sessions),
    ):
        if not isinstance(value, list):
            raise fail(f"{key} is {type_name(value)}, not a list")
    if not len(dates) == len(ids) == len(raw_sessions):
        raise fail(
            f"haystack_dates, haystack_session_ids and haystack_sessions differ in length "
            f"({len(dates)}, {len(ids)}, {len(raw_sessions)})"
        )
    answer_ids = record.get("answer_session_ids") or []
    if not isinstance(answer_ids, list):
        raise fail(f"answer_session_ids is {type_name(answer_ids)}, not a list")
    answers = {str(i) for i in answer_ids}
    # Chronological order; a stable sort keeps file order for equal dates.
    order = sorted(range(len(raw_sessions)), key=lambda k: str(dates[k]))
    sessions = []
    evidence: list[str] = []
    for n, k in enumerate(order, start=1):
        raw = raw_sessions[k]
        if not isinstance(raw, list):
            raise fail(f"haystack session {k} ({ids[k]}) is not a list")
        date = str(dates[k]) if dates[k] is not None else None
        turns = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("role"), str):
                raise fail(f"haystack session {k} ({ids[k]}) turn {i} is missing 'role'")
            if not isinstance(item.get("content"), str):
                raise fail(f"haystack session {k} ({ids[k]}) turn {i} is missing 'content'")
            dia_id = f"D{n}:{i + 1}"
            turns.append(
                Turn(
                    dia_id=dia_id, speaker=item["role"], text=item["content"], session_index=n, timestamp=date
                )
            )
            if item.get("has_answer") is True:
                evidence.append(dia_id)
        sessions.append(Session(index=n, date_time=date, turns=tuple(turns), session_id=str(ids[k]),
                                answer_session=str(ids[k]) in answers))
    question_date = record.get("question_date")
    question = Question(
        question_id=question_id,
        question=str(record["question"]),
        answer=str(record["answer"]),
        category=str(record["question_type"]),
        category_id=None,
        evidence=tuple(evidence),
        question_date=str(question_date) if question_date is not None else None,
        abstention=question_id.endswith("_abs"),
        adversarial_answer=None,
    )
    return Conversation(
        sample_id=question_id,
        speakers=SPEAKERS,
        sessions=tuple(sessions),
        questions=(question,),
        dataset="longmemeval",
    )
