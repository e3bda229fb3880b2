"""Attribution over a run directory: failed cases in, `verdicts.jsonl` out (append-safe, resumable).

    result = attribute_run("runs/x", "graphtrace", lm=attributor_lm)
    for table in summary_tables(result.verdicts, result.cases): console.print(table)
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from memtrace_opt.attribution._gold import AnswerJudge
from memtrace_opt.attribution._types import ERROR_TYPES, FailedCase, Verdict
from memtrace_opt.attribution.protocol import (
    JUDGED_METHODS,
    REPLAY_METHODS,
    AttributionConfig,
    ProgressFn,
    attribute_cases,
    get_attributor,
)
from memtrace_opt.errors import MemtraceError
from memtrace_opt.rundir import append_jsonl, read_jsonl

__all__ = [
    "VERDICT_SCHEMA_VERSION",
    "AttributeRunResult",
    "attribute_run",
    "failed_cases",
    "read_verdicts",
    "append_verdict",
    "latest",
    "replayable",
    "run_replay_provider",
    "recorded_conversations",
    "summary_tables",
]

log = logging.getLogger(__name__)

VERDICT_SCHEMA_VERSION = 1
CASES_FILE = "cases.jsonl"
VERDICTS_FILE = "verdicts.jsonl"


def case_from_row(row: Mapping[str, Any], root: Path) -> FailedCase:
    """A FailedCase from a cases.jsonl line; its graph path is relative to `root`."""
    question = {
        "question_id": row["question_id"],
        "question": row.get("question", ""),
        "answer": row.get("gold", ""),
        "category": row.get("category") or "",
        "evidence": list(row.get("evidence") or []),
        "abstention": bool(row.get("abstention", False)),
    }
    graph = row.get("graph")
    return FailedCase(
        case_id=str(row.get("case_id") or row["question_id"]),
        question=question,
        gold=str(row.get("gold", "")),
        prediction=str(row.get("prediction", "")),
        evidence=tuple(str(e) for e in row.get("evidence") or ()),
        system=str(row.get("system", "")),
        sample_id=str(row.get("sample_id", "")),
        graph_path=(root / graph) if graph else None,
    )


def failed_cases(run_dir: str | Path) -> list[FailedCase]:
    """The cases of a run marked `correct: false`, in file order. MemtraceError if it is not a run."""
    root = Path(run_dir)
    path = root / CASES_FILE
    if not path.exists():
        raise MemtraceError(f"{root} is not a run directory (no {CASES_FILE})")
    return [case_from_row(row, root) for row in read_jsonl(path) if row.get("correct") is False]


def read_verdicts(path: str | Path) -> list[Verdict]:
    """Every verdict line of a verdicts file (later lines for the same case and method win in `latest`)."""
    return [Verdict.from_dict(row) for row in read_jsonl(Path(path))]


def verdict_line(verdict: Verdict) -> str:
    return json.dumps({"schema_version": VERDICT_SCHEMA_VERSION, **verdict.to_dict()}, sort_keys=True, ensure_ascii=False)


_APPEND_LOCK = threading.Lock()


def append_verdict(path: str | Path, verdict: Verdict) -> None:
    """Append one verdict line and flush (a crash keeps every verdict written before it)."""
    with _APPEND_LOCK:
        append_jsonl(Path(path), verdict_line(verdict))


def latest(verdicts: Iterable[Verdict], method: str | None = None) -> dict[str, Verdict]:
    """case_id -> the last verdict (of `method`, if given)."""
    found: dict[str, Verdict] = {}
    for verdict in verdicts:
        if method is None or verdict.method == method:
            found[verdict.case_id] = verdict
    return found


@dataclass(frozen=True)
class AttributeRunResult:
    """`verdicts`: the method's verdict for every failed case (earlier runs' included); `new` how many were
    attributed now; `skipped` how many were already attributed."""

    path: Path
    method: str
    cases: tuple[FailedCase, ...]
    verdicts: tuple[Verdict, ...]
    new: int
    skipped: int


def attribute_run(
    run_dir: str | Path,
    method: str,
    *,
    lm: Any = None,
    config: AttributionConfig | None = None,
    progress: ProgressFn | None = None,
    num_threads: int = 1,
    limit: int | None = None,
    replay_provider: Callable[[FailedCase], Any] | None = None,
    judge: AnswerJudge | None = None,
) -> AttributeRunResult:
    """Attribute the run's failed cases with `method`, appending to `<run>/verdicts.jsonl`. `replay_provider` goes
    to the methods that replay (`REPLAY_METHODS`), `judge` (an `AnswerJudge`) to those that take one.

    Resumable: a case that already has a verdict (without `error`) from this method is skipped; a case whose
    earlier attempt ended in an error is tried again. A case with a missing or broken graph file gets an
    error verdict; the others go on.
    """
    root = Path(run_dir)
    cases = failed_cases(root)
    if limit is not None:
        cases = cases[:limit]
    path = root / VERDICTS_FILE
    done = {cid: v for cid, v in latest(read_verdicts(path), method).items() if v.error is None}
    todo = [c for c in cases if c.case_id not in done]
    options: dict[str, Any] = {}
    if replay_provider is not None and method in REPLAY_METHODS:
        options["replay_provider"] = replay_provider
    if judge is not None and method in JUDGED_METHODS:
        options["judge"] = judge
    attributor = get_attributor(method, config, **options)

    def on_done(count: int, total: int, verdict: Verdict) -> None:
        append_verdict(path, verdict)
        if progress is not None:
            progress(count, total, verdict)

    new = attribute_cases(todo, attributor, lm=lm, progress=on_done, num_threads=num_threads)
    by_case = {**done, **{v.case_id: v for v in new}}
    ordered = tuple(by_case[c.case_id] for c in cases if c.case_id in by_case)
    return AttributeRunResult(path, method, tuple(cases), ordered, len(new), len(cases) - len(todo))


def recorded_conversations(spec: str, data_slice: Mapping[str, Any] | None) -> dict[str, Any]:
    """sample id -> Conversation of a data spec and a recorded slice (`DataSlice.to_dict()`, or None)."""
    from memtrace_opt.data import DataSlice, load_data

    dataset = load_data(spec, DataSlice.from_dict(data_slice) if data_slice else None)
    return {c.sample_id: c for c in dataset.conversations}


def replayable(run_dir: str | Path) -> bool:
    """Whether the run's cases can be replayed: its config.yaml records the system that ran."""
    import yaml

    path = Path(run_dir) / "config.yaml"
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(cfg, Mapping) and bool(cfg.get("system"))


def run_replay_provider(run_dir: str | Path, task_lm: Any = None) -> Callable[[FailedCase], Any]:
    """A replay provider for the replaying methods from a run directory: the program rebuilt from
    config.yaml (system, program settings, program.json if saved), the conversation reloaded from the
    recorded data spec and slice, the case's graph as the record. Conversations load once, on first use."""
    import yaml

    from memtrace_opt.attribution.counterfactual import ReplayContext

    root = Path(run_dir)
    config_path = root / "config.yaml"
    cfg = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {}
    cache: dict[str, Any] = {}
    lock = threading.Lock()

    def load() -> tuple[Any, dict[str, Any]]:
        from memtrace_opt.programs import make_program

        if not cfg or not cfg.get("system"):
            raise MemtraceError(f"{config_path}: no system recorded; cannot replay")
        program = make_program(str(cfg["system"]), dict(cfg.get("program") or {}))
        saved = root / "program.json"
        program_path = Path(cfg["program_path"]) if cfg.get("program_path") else saved if saved.exists() else None
        if program_path is not None and program_path.is_file():
            program.load(str(program_path))
        data = cfg.get("data") or {}
        return program, recorded_conversations(str(data.get("path") or data.get("spec") or "sample"), data.get("slice"))

    def provide(case: FailedCase) -> Any:
        with lock:
            if "program" not in cache:
                cache["program"], cache["conversations"] = load()
        conversation = cache["conversations"].get(case.sample_id)
        if conversation is None:
            return None
        return ReplayContext(program=cache["program"], conversation=conversation, lm=task_lm)

    return provide


def summary_tables(verdicts: Iterable[Verdict], cases: Iterable[FailedCase] = ()) -> list[Table]:
    """Rich tables: error types per system, and the most blamed ops per system."""
    system_of = {c.case_id: c.system or "?" for c in cases}
    verdicts = list(verdicts)
    types: Counter[tuple[str, str]] = Counter()
    ops: Counter[tuple[str, str, str]] = Counter()
    totals: Counter[str] = Counter()
    for v in verdicts:
        system = system_of.get(v.case_id, "?")
        totals[system] += 1
        types[(system, v.error_type or ("error" if v.error else "none"))] += 1
        if v.op:
            ops[(system, v.op, v.predictor or "-")] += 1
    method = verdicts[0].method if verdicts else ""
    by_type = Table(title=f"root causes by error type ({method})")
    for column in ("system", "error type", "cases", "share"):
        by_type.add_column(column, justify="right" if column in ("cases", "share") else "left")
    order = {name: i for i, name in enumerate((*ERROR_TYPES, "error", "none"))}
    for (system, kind), count in sorted(types.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        by_type.add_row(system, kind, str(count), f"{count / totals[system]:.0%}")
    by_op = Table(title=f"blamed operations ({method})")
    for column in ("system", "op", "predictor", "cases"):
        by_op.add_column(column, justify="right" if column == "cases" else "left")
    for (system, op, predictor), count in sorted(ops.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        by_op.add_row(system, op, predictor, str(count))
    return [by_type, by_op]
