"""Reading dataset files and reporting what is wrong with them in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memtrace_opt.errors import DatasetError


def read_json(path: Path) -> Any:
    """Parse a JSON file; any failure becomes a one-line DatasetError naming the file."""
    if not path.exists():
        raise DatasetError(f"{path}: no such file")
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory, not a dataset file")
    try:
        with path.open("r", encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{path.name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "the file may be truncated"
        ) from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path.name}: not UTF-8 text") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def record_error(path: Path, index: int, record_id: str | None, message: str) -> DatasetError:
    """A DatasetError like "locomo10.json: record 3 (conv-30): session_2 is not a list"."""
    label = f"record {index}" + (f" ({record_id})" if record_id else "")
    return DatasetError(f"{path.name}: {label}: {message}")


def require_list(path: Path, data: Any, what: str) -> list[Any]:
    """The top level of a dataset file must be a JSON list of records."""
    if not isinstance(data, list):
        raise DatasetError(
            f"{path.name}: expected a JSON list of {what} records at the top level, got {type_name(data)}"
        )
    if not data:
        raise DatasetError(f"{path.name}: contains no records")
    return data


def type_name(value: Any) -> str:
    """A JSON-ish name for a value's type, for error messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return names.get(type(value), type(value).__name__)
