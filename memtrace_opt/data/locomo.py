"""Loader for LoCoMo-format files (Maharana et al., ACL 2024), including the packaged sample.

Quirks of the published file handled here:
- category 5 (adversarial) rows carry `adversarial_answer` instead of `answer`; their gold is an
  abstention (ABSTAIN_ANSWER), scored as upstream does, and the misleading answer is kept aside;
- a few answers are integers (converted to strings);
- a few evidence ids are malformed ("D8:6; D9:17", "D:11:26", "D30:05", "D"): split and cleaned;
- conv-26 has more `session_N_date_time` keys than sessions: sessions are found by their own keys;
- image turns keep their `blip_caption`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memtrace_opt.data._io import read_json, record_error, require_list, type_name
from memtrace_opt.data._types import ABSTAIN_ANSWER, Conversation, Dataset, Question, Session, Turn
from memtrace_opt.errors import DatasetError

logger = logging.getLogger(__name__)

# Upstream evaluation code's numbering (task_eval/evaluation.py). Mem0's papers number differently.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL_CATEGORY = 5

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_ID = re.compile(r"^D:?(\d+):(\d+)$")


def is_locomo(data: Any) -> bool:
    """Whether parsed JSON looks like a LoCoMo file (a list of records with `conversation` and `qa`)."""
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], dict)
        and "conversation" in data[0]
        and "qa" in data[0]
    )


def load_locomo(path: str | Path, name: str = "locomo") -> Dataset:
    """Load a LoCoMo-format JSON file. Raises DatasetError naming the file and record on bad input."""
    file = Path(path)
    records = require_list(file, read_json(file), "LoCoMo")
    return parse_locomo(records, file, name=name)


def parse_locomo(records: list[Any], file: Path, name: str = "locomo") -> Dataset:
    """Build a Dataset from already-parsed LoCoMo records; `file` is only used in messages."""
    conversations = tuple(_parse_record(record, index, file) for index, record in enumerate(records))
    seen: set[str] = set()
    for index, conversation in enumerate(conversations):
        if conversation.sample_id in seen:
            raise record_error(file, index, conversation.sample_id, "duplicate sample_id")
        seen.add(conversation.sample_id)
    return Dataset(name=name, path=str(file), conversations=conversations)


def clean_evidence(raw: Any) -> tuple[str, ...]:
    """Normalize a list of evidence ids: split "D8:6; D9:17", fix "D:11:26" and "D30:05", drop "D"."""
    cleaned: list[str] = []
    for item in raw:
        for piece in re.split(r"[;,\s]+", str(item)):
            if not piece:
                continue
            match = _EVIDENCE_ID.match(piece)
            if match is None:
                logger.debug("dropping malformed evidence id %r", piece)
                continue
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id not in cleaned:
                cleaned.append(dia_id)
    return tuple(cleaned)


def _parse_record(record: Any, index: int, file: Path) -> Conversation:
    if not isinstance(record, dict):
        raise record_error(file, index, None, f"expected an object, got {type_name(record)}")
    sample_id = record.get("sample_id")
    if not isinstance(sample_id, (str, int)) or isinstance(sample_id, bool) or str(sample_id) == "":
        raise record_error(file, index, None, "missing key 'sample_id'")
    sample_id = str(sample_id)

    def fail(message: str) -> DatasetError:
        return record_error(file, index, sample_id, message)

    for key in ("conversation", "qa"):
        if key not in record:
            raise fail(f"missing key '{key}'")
    conv = record["conversation"]
    if not isinstance(conv, dict):
        raise fail(f"conversation is {type_name(conv)}, not an object")
    for key in ("speaker_a", "speaker_b"):
        if not isinstance(conv.get(key), str):
            raise fail(f"conversation is missing '{key}'")
    numbers = sorted(int(m.group(1)) for m in map(_SESSION_KEY.match, conv) if m)
    if not numbers:
        raise fail("conversation has no session_N keys")
    sessions = tuple(_parse_session(conv, n, fail) for n in numbers)
    qa = record["qa"]
    if not isinstance(qa, list):
        raise fail(f"qa is {type_name(qa)}, not a list")
    questions = tuple(_parse_question(item, i, sample_id, fail) for i, item in enumerate(qa))
    return Conversation(
        sample_id=sample_id,
        speakers=(conv["speaker_a"], conv["speaker_b"]),
        sessions=sessions,
        questions=questions,
        dataset="locomo",
    )


def _parse_session(conv: dict[str, Any], n: int, fail: Callable[[str], DatasetError]) -> Session:
    key = f"session_{n}"
    raw = conv[key]
    if not isinstance(raw, list):
        raise fail(f"{key} is not a list")
    date_time = conv.get(f"{key}_date_time")
    if date_time is not None and not isinstance(date_time, str):
        raise fail(f"{key}_date_time is {type_name(date_time)}, not a string")
    turns = []
    for t, item in enumerate(raw):
        if not isinstance(item, dict):
            raise fail(f"{key} turn {t} is {type_name(item)}, not an object")
        for field_name in ("speaker", "dia_id", "text"):
            if not isinstance(item.get(field_name), str):
                raise fail(f"{key} turn {t} is missing '{field_name}'")
        caption = item.get("blip_caption")
        turns.append(
            Turn(
                dia_id=item["dia_id"],
                speaker=item["speaker"],
                text=item["text"],
                session_index=n,
                timestamp=date_time,
                image_caption=caption if isinstance(caption, str) and caption else None,
            )
        )
    return Session(index=n, date_time=date_time, turns=tuple(turns))


def parse_question(item: Any, index: int, sample_id: str) -> Question:
    """One `qa` record of a LoCoMo file as the loader reads it, with the question id `{sample_id}:q{index}`."""
    return _parse_question(item, index, sample_id, lambda message: DatasetError(f"{sample_id}: {message}"))


def _parse_question(item: Any, i: int, sample_id: str, fail: Callable[[str], DatasetError]) -> Question:
    if not isinstance(item, dict):
        raise fail(f"qa {i} is {type_name(item)}, not an object")
    question = item.get("question")
    if not isinstance(question, str):
        raise fail(f"qa {i} is missing 'question'")
    category_id = item.get("category")
    if not isinstance(category_id, int) or isinstance(category_id, bool):
        raise fail(f"qa {i} is missing an integer 'category'")
    evidence = item.get("evidence", [])
    if not isinstance(evidence, list):
        raise fail(f"qa {i} evidence is {type_name(evidence)}, not a list")
    adversarial = category_id == ADVERSARIAL_CATEGORY
    if adversarial:
        answer = ABSTAIN_ANSWER
        raw_adv = item.get("adversarial_answer")
        adversarial_answer = None if raw_adv is None else str(raw_adv)
    else:
        if "answer" not in item or item["answer"] is None:
            raise fail(f"qa {i} is missing 'answer'")
        answer = str(item["answer"])
        adversarial_answer = None
    return Question(
        question_id=f"{sample_id}:q{i}",
        question=question,
        answer=answer,
        category=LOCOMO_CATEGORIES.get(category_id, f"category-{category_id}"),
        category_id=category_id,
        evidence=clean_evidence(evidence),
        question_date=None,
        abstention=adversarial,
        adversarial_answer=adversarial_answer,
    )
