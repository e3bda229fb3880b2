"""JSON form of the values operations pass around, with references the graph builder can follow.

A memory unit becomes `{"$mem": "mem:ID@V", ...fields}`, a turn `{"$turn": "turn:D1:3", ...}`, a question
`{"$question": "q:ID", ...}`. `from_jsonable` revives them; `refs_in` lists every node id a value names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from memtrace_opt.memory.store import MemoryUnit

__all__ = ["to_jsonable", "from_jsonable", "refs_in", "canonical_json", "content_key"]

_MARKERS = ("$mem", "$turn", "$question")


_NATIVE = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    """A JSON-native copy of `value`; units, turns and questions carry their graph node id."""
    cls = type(value)
    if cls in _NATIVE:  # fast paths for the exact built-in types (the trace hook calls this on every op)
        return value
    if cls is list or cls is tuple:
        return [to_jsonable(v) for v in value]
    if cls is dict:
        return {k if type(k) is str else str(k): to_jsonable(v) for k, v in value.items()}
    from memtrace_opt.data import Question, Turn  # local: data imports nothing from memory

    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, MemoryUnit):
        return {"$mem": value.ref, **value.to_dict()}
    if isinstance(value, Turn):
        return {"$turn": f"turn:{value.dia_id}", **value.to_dict()}
    if isinstance(value, Question):
        return {"$question": f"q:{value.question_id}", **value.to_dict()}
    jsonable = getattr(type(value), "__jsonable__", None)
    if jsonable is not None:  # an object that names its own JSON form (e.g. MemoryState: a short fingerprint)
        return to_jsonable(jsonable(value))
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if hasattr(value, "items") and hasattr(value, "keys") and callable(value.items):  # dspy.Prediction
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return repr(value)


def from_jsonable(value: Any) -> Any:
    """Inverse of `to_jsonable` for units, turns and questions; other values come back as JSON types."""
    from memtrace_opt.data import Question, Turn

    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    if isinstance(value, dict):
        if "$mem" in value:
            return MemoryUnit.from_dict({k: v for k, v in value.items() if k != "$mem"})
        if "$turn" in value:
            return Turn.from_dict({k: v for k, v in value.items() if k != "$turn"})
        if "$question" in value:
            return Question.from_dict({k: v for k, v in value.items() if k != "$question"})
        return {k: from_jsonable(v) for k, v in value.items()}
    return value


def refs_in(value: Any) -> Iterator[str]:
    """Every graph node id (`mem:...`, `turn:...`, `q:...`) named anywhere inside a JSON value, in order."""
    if isinstance(value, list):
        for item in value:
            yield from refs_in(item)
    elif isinstance(value, dict):
        for marker in _MARKERS:
            if marker in value:
                yield value[marker]
                return
        for item in value.values():
            yield from refs_in(item)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def content_key(*parts: Any) -> str:
    """A stable sha256 of JSON values: the content address of an operation call."""
    return hashlib.sha256(canonical_json([to_jsonable(p) for p in parts]).encode()).hexdigest()
