"""Fixtures for the data tests: the real benchmark files beside the checkout, and small bad files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memtrace_opt.data import Dataset, load_locomo, load_longmemeval

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


def shared_file(*parts: str) -> Path:
    """A file under ../shared/data: skipped where absent locally, a failure in CI (CI is set)."""
    path = SHARED_DATA_DIR.joinpath(*parts)
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing in CI: the benchmark data must sit beside the checkout")
        pytest.skip(f"{path} is absent: the LoCoMo/LongMemEval files are not part of the repository")
    return path


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    return shared_file("locomo", "locomo10.json")


@pytest.fixture(scope="session")
def longmemeval_path() -> Path:
    return shared_file("longmemeval", "longmemeval_oracle.json")


@pytest.fixture(scope="session")
def locomo(locomo_path: Path) -> Dataset:
    return load_locomo(locomo_path)


@pytest.fixture(scope="session")
def longmemeval(longmemeval_path: Path) -> Dataset:
    return load_longmemeval(longmemeval_path)


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[str, Any], Path]:
    """Write `data` as JSON to tmp_path/name and return the path."""

    def write(name: str, data: Any) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    return write


def locomo_record(sample_id: str = "conv-x", sessions: int = 2) -> dict[str, Any]:
    """A small valid LoCoMo record, for tests that break one part of it."""
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n in range(1, sessions + 1):
        conversation[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
        conversation[f"session_{n}"] = [
            {"speaker": "Ann", "dia_id": f"D{n}:1", "text": f"hello {n}"},
            {"speaker": "Bob", "dia_id": f"D{n}:2", "text": f"hi {n}"},
        ]
    qa = [{"question": "What did Ann say?", "answer": "hello 1", "evidence": ["D1:1"], "category": 4}]
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa}


def longmemeval_record(question_id: str = "q1") -> dict[str, Any]:
    """A small valid LongMemEval record (S-format style: dates out of order, no has_answer keys)."""
    return {
        "question_id": question_id,
        "question_type": "single-session-user",
        "question": "What is my dog's name?",
        "answer": "Rex",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/20 (Sat) 09:00", "2023/05/02 (Tue) 18:30"],
        "haystack_session_ids": ["later", "earlier"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "My dog Rex loves the park."},
                {"role": "assistant", "content": "Nice!"},
            ],
            [{"role": "user", "content": "Hello."}],
        ],
        "answer_session_ids": ["later"],
    }


@pytest.fixture
def make_locomo_record() -> Callable[..., dict[str, Any]]:
    return locomo_record


@pytest.fixture
def make_longmemeval_record() -> Callable[..., dict[str, Any]]:
    return longmemeval_record
