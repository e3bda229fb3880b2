"""Format detection and the packaged sample conversation."""

from __future__ import annotations

from pathlib import Path

from memtrace_opt.data._io import read_json, require_list
from memtrace_opt.data._types import Dataset
from memtrace_opt.data.locomo import is_locomo, parse_locomo
from memtrace_opt.data.longmemeval import is_longmemeval, parse_longmemeval
from memtrace_opt.errors import DatasetError

SAMPLE_PATH = Path(__file__).resolve().parent / "sample" / "sample_conversation.json"


def load_dataset(path: str | Path, name: str | None = None) -> Dataset:
    """Load a LoCoMo- or LongMemEval-format file, detecting which from its records.

    `name` defaults to the detected format ("locomo" or "longmemeval").
    Raises DatasetError (one line, naming the file and record) for anything unreadable or malformed.
    """
    file = Path(path)
    records = require_list(file, read_json(file), "dataset")
    if is_locomo(records):
        return parse_locomo(records, file, name=name or "locomo")
    if is_longmemeval(records):
        return parse_longmemeval(records, file, name=name or "longmemeval")
    raise DatasetError(
        f"{file.name}: record 0: unknown dataset format (expected LoCoMo records with 'conversation' "
        "and 'qa', or LongMemEval records with 'question_id' and 'haystack_sessions')"
    )


def load_sample() -> Dataset:
    """The packaged sample: one short LoCoMo-format conversation ("sample-1") with a dozen questions."""
    return load_dataset(SAMPLE_PATH, name="sample")
