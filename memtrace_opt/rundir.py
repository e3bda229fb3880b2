"""The run directory of docs/design.md: one place where a run's artifacts live, written as they are produced.

```
<run>/config.yaml     resolved configuration (models by role, system, data slice, seeds); no secrets
      manifest.json   schema_version, versions, timings, LM usage by role, counts, rounds
      cases.jsonl     one line per question: ids, gold, prediction, scores, correct, graph path
      graphs/*.json   evolution graphs, one per conversation run
      events/*.jsonl  the trace events, one file per conversation run
      verdicts.jsonl  attribution verdicts
      program.json    the (compiled) DSPy program state
      report.html     a self-contained page
```
cases.jsonl is appended and flushed per question, so a crash keeps every answered question.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memtrace_opt._runlock import LOCK_NAME, RunLock
from memtrace_opt.errors import MemtraceError
from memtrace_opt.redact import redact, redact_text

log = logging.getLogger(__name__)

__all__ = ["SCHEMA_VERSION", "RunDir", "CaseRecord", "CASE_FIELDS", "case_fields", "read_case_fields", "read_jsonl",
           "append_jsonl", "safe_name", "write_json", "write_jsonl", "versions", "add_usage"]

SCHEMA_VERSION = 1


def write_json(path: Path, data: Any) -> None:
    """Deterministic JSON (sorted keys, 2-space indent, trailing newline), written atomically, secrets redacted."""
    _write_atomic(path, json.dumps(redact(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, lines: Iterable[str]) -> None:
    """JSON lines (already serialized), one per line, written atomically in place of the file, secrets redacted."""
    _write_atomic(path, "".join(redact_text(line) + "\n" for line in lines))


def _write_atomic(path: Path, text: str) -> None:
    """Write beside `path` and rename over it; the temporary name is the writer's own, so threads of one run
    (conversations checkpointing the manifest) never rename each other's half-written file."""
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Reads JSON lines; a truncated last line (a crash mid-write) is skipped, any other bad line is an error."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                log.warning("%s: skipping a truncated last line", path)
                break
            raise MemtraceError(f"{path}: line {number} is not valid JSON ({error.msg})") from error
    return rows


def append_jsonl(path: Path, line: str) -> None:
    """Append one JSON line (secrets redacted) and flush. A partial last line left by a crash mid-write (which
    `read_jsonl` skips) is cut first, so the new line cannot be glued onto it."""
    line = redact_text(line)
    with path.open("a+b") as handle:
        size = handle.seek(0, 2)
        if size:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                handle.seek(0)
                data = handle.read()
                handle.truncate(data.rfind(b"\n") + 1)
        handle.write(line.encode("utf-8") + b"\n")
        handle.flush()


def safe_name(sample_id: str) -> str:
    """A sample id as a file name, one name per id: an id of letters, digits, `-`, `_` and `.` is its own name
    (so the names of such ids are what earlier releases wrote); in any other id those characters become `_`
    and 8 hex digits of the id's sha1 follow, so `conv/1` and `conv_1` never share a file."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in sample_id)
    if cleaned == sample_id and sample_id not in ("", ".", ".."):
        return sample_id
    return f"{cleaned}-{hashlib.sha1(sample_id.encode('utf-8')).hexdigest()[:8]}"


def add_usage(*usages: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """LM usage by role (a manifest's `usage`) summed over several processes: a resumed run's whole cost."""
    total: dict[str, dict[str, Any]] = {}
    for usage in usages:
        for role, counts in (usage or {}).items():
            into = total.setdefault(role, {})
            for key, value in (counts or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    into[key] = round(into.get(key, 0) + value, 3) if isinstance(value, float) else into.get(key, 0) + value
    return dict(sorted(total.items()))


def versions() -> dict[str, str]:
    import dspy
    import networkx

    import memtrace_opt

    return {
        "memtrace_opt": memtrace_opt.__version__,
        "dspy": getattr(dspy, "__version__", "?"),
        "networkx": networkx.__version__,
        "python": platform.python_version(),
    }


# the fields every case line holds: a run's (cases.jsonl) and a MemTraceBench case's alike
CASE_FIELDS = ("case_id", "system", "dataset", "sample_id", "question_id", "question", "gold", "prediction",
               "category", "evidence", "abstention")


def case_fields(case: Any) -> dict[str, Any]:
    """The CASE_FIELDS of `case` (an object with those attributes) as a case line writes them."""
    return {**{name: getattr(case, name) for name in CASE_FIELDS}, "evidence": list(case.evidence)}


def read_case_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The CASE_FIELDS of a case line as read: the ids and texts as strings (a missing one empty, but the case and
    question ids), `evidence` a list of strings, `abstention` a bool."""
    return {
        "case_id": str(data["case_id"]),
        "system": str(data.get("system") or ""),
        "dataset": str(data.get("dataset") or ""),
        "sample_id": str(data.get("sample_id") or ""),
        "question_id": str(data["question_id"]),
        "question": str(data.get("question") or ""),
        "gold": str(data.get("gold", "")),
        "prediction": str(data.get("prediction", "")),
        "category": str(data.get("category") or ""),
        "evidence": [str(e) for e in data.get("evidence") or ()],
        "abstention": bool(data.get("abstention", False)),
    }


@dataclass
class CaseRecord:
    """One question of a run, as a line of cases.jsonl."""

    case_id: str
    system: str
    dataset: str
    sample_id: str
    question_id: str
    question: str
    gold: str
    prediction: str
    category: str
    evidence: list[str]
    abstention: bool
    scores: dict[str, float | None]
    correct: bool
    graph: str | None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            **case_fields(self),
            "scores": dict(self.scores),
            "correct": self.correct,
            "graph": self.graph,
            "error": self.error,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseRecord:
        return cls(
            **read_case_fields(data),
            scores=dict(data.get("scores", {})),
            correct=bool(data.get("correct", False)),
            graph=data.get("graph"),
            error=data.get("error"),
            extra=dict(data.get("extra", {})),
        )


class RunDir:
    """Paths and writers of one run directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def cases_path(self) -> Path:
        return self.root / "cases.jsonl"

    @property
    def graphs_dir(self) -> Path:
        return self.root / "graphs"

    @property
    def events_dir(self) -> Path:
        return self.root / "events"

    def events_path(self, sample_id: str) -> Path:
        return self.events_dir / f"{safe_name(sample_id)}.jsonl"

    @property
    def verdicts_path(self) -> Path:
        return self.root / "verdicts.jsonl"

    @property
    def program_path(self) -> Path:
        return self.root / "program.json"

    @property
    def report_path(self) -> Path:
        return self.root / "report.html"

    def graph_path(self, sample_id: str) -> Path:
        return self.graphs_dir / f"{safe_name(sample_id)}.json"

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_NAME

    def lock(self, command: str = "") -> RunLock:
        """The run directory's exclusive lock (a context manager): one writer per run directory."""
        return RunLock(self.root, command=command)

    def has_artifacts(self) -> bool:
        """Whether anything a run writes is here already (a finished run, or one that was killed)."""
        return (self.cases_path.exists() or self.config_path.exists() or self.manifest_path.exists()
                or any(self.events_dir.glob("*.jsonl")) or any(self.graphs_dir.glob("*.json")))

    def discard_conversation(self, sample_id: str) -> None:
        """Remove one conversation's events, graph and cases (an unfinished conversation a resume runs again)."""
        self.events_path(sample_id).unlink(missing_ok=True)
        self.graph_path(sample_id).unlink(missing_ok=True)
        if self.cases_path.exists():
            with self._lock:
                kept = [row for row in read_jsonl(self.cases_path) if row.get("sample_id") != sample_id]
                write_jsonl(self.cases_path, (json.dumps(row, sort_keys=True, ensure_ascii=False) for row in kept))

    def create(self, *, fresh: bool = True) -> RunDir:
        if fresh and self.cases_path.exists():
            raise MemtraceError(f"{self.root} already holds a run (cases.jsonl); choose another --out or remove it")
        self.graphs_dir.mkdir(parents=True, exist_ok=True)
        self.events_dir.mkdir(parents=True, exist_ok=True)
        return self

    def require(self) -> RunDir:
        if not self.cases_path.exists():
            raise MemtraceError(f"{self.root} is not a run directory (no cases.jsonl)")
        return self

    # writers -----------------------------------------------------------------------------------------
    def write_config(self, config: dict[str, Any]) -> None:
        text = yaml.safe_dump(redact({"schema_version": SCHEMA_VERSION, **config}), sort_keys=True, allow_unicode=True)
        self.config_path.write_text(text, encoding="utf-8")

    def read_config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            return {}
        return yaml.safe_load(self.config_path.read_text(encoding="utf-8")) or {}

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, {"schema_version": SCHEMA_VERSION, **manifest})

    def read_manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {}
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def append_case(self, case: CaseRecord) -> None:
        line = json.dumps(redact(case.to_dict()), sort_keys=True, ensure_ascii=False)
        with self._lock:
            append_jsonl(self.cases_path, line)

    def read_cases(self) -> list[CaseRecord]:
        return [CaseRecord.from_dict(row) for row in read_jsonl(self.cases_path)]
