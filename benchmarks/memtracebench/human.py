"""Human labels into a bench: the failed questions of a run that a person labelled (`RUN/labels.jsonl`, written
by the labelling page) become bench cases with `source: human`, each with a copy of its evolution graph.

    summary = import_labels("runs/mem0-locomo", "runs/mem0-locomo/labels.jsonl", "bench-human")

Every label is checked before anything is written: a label whose case the run lacks, whose error type is
unknown, or which names an op its graph lacks refuses the whole import with one line naming the case. Cases
already in the bench stay; a case imported again (the same run and question) takes the new label. Verdicts in
`eval/` are kept: a verdict does not depend on the label, and a relabelled case is scored on its new label.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.benchmarks.memtracebench._types import BENCH_SCHEMA_VERSION, BenchCase, Label
from memtrace_opt.benchmarks.memtracebench.build import CASES_FILE, _safe, write_cases
from memtrace_opt.errors import MemtraceError

__all__ = ["ImportSummary", "import_labels", "human_case_id", "human_run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImportSummary:
    out: Path
    added: int  # cases new to the bench
    replaced: int  # cases the bench had, relabelled
    cases: int  # cases in the bench now
    counts: dict[str, dict[str, int]]  # system -> "source/error_type" -> cases


def human_case_id(system: str, question_id: str, run_name: str) -> str:
    """`{system}:{question_id}:human:{run}`: the same question failed by two runs gives two cases."""
    return f"{system}:{question_id}:human:{run_name}"


def human_run(case_id: str) -> str | None:
    """The run a `human_case_id` was imported from; None for any other case id."""
    head, marker, run = case_id.rpartition(":human:")
    return run if marker and head else None


def _checked(run: Any, labels_path: Path) -> list[tuple[dict[str, Any], Label]]:
    """(run case, label) for the latest label of each case, in label order; MemtraceError naming the case."""
    from memtrace_opt.attribution import ERROR_TYPES, GOLD
    from memtrace_opt.report.labels import check_ops, latest_labels

    cases = {str(c.get("case_id")): c for c in run.cases}
    checked = []
    for case_id, line in latest_labels(labels_path).items():
        case = cases.get(case_id)
        if case is None:
            raise MemtraceError(f"{labels_path}: case {case_id} is not a question of the run {run.name}")
        error_type = str(line.get("error_type"))
        if error_type not in ERROR_TYPES:
            raise MemtraceError(f"{labels_path}: case {case_id}: unknown error type {error_type!r}")
        ops = tuple(str(op) for op in line.get("ops") or ([line["op_id"]] if line.get("op_id") else []))
        if error_type == GOLD:
            ops = ()  # the gold answer or the metric is at fault, no op
        elif not ops:
            raise MemtraceError(f"{labels_path}: case {case_id}: the label names no op")
        names = check_ops(run.graph(case.get("graph")), list(ops), case_id) if ops else {}
        label = Label(error_type, ops[0] if ops else None, names[ops[0]] if ops else None, "human", ops,
                      str(line.get("rationale") or ""), str(line.get("by") or ""), str(line.get("at") or ""))
        checked.append((case, label))
    return checked


def _request(run: Any, system: str) -> dict[str, Any]:
    """What `bench_replay_provider` needs to replay the run's cases: data spec and slice, the program settings."""
    data = run.config.get("data") or {}
    settings = {k: v for k, v in (run.config.get("program") or {}).items() if k != "system"}
    return {"systems": [system], "data": data.get("spec") or "sample", "slice": data.get("slice"),
            "settings": {system: settings}}


def import_labels(run_dir: str | Path, labels_path: str | Path, out: str | Path) -> ImportSummary:
    """Adds the labelled cases of the run at `run_dir` to the bench at `out` (created if absent)."""
    from memtrace_opt.report import load_run

    run = load_run(run_dir)
    labels_path, out = Path(labels_path), Path(out)
    if not labels_path.is_file():
        raise MemtraceError(f"{labels_path}: no labels file")
    checked = _checked(run, labels_path)
    if not checked:
        raise MemtraceError(f"{labels_path}: no labels to import")
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    _refuse_name_clash(run, manifest, out)
    existing: list[BenchCase] = []
    if (out / CASES_FILE).is_file():
        from memtrace_opt.benchmarks.memtracebench.evaluate import load_bench

        existing = load_bench(out)[1]
    copied: dict[str, str] = {}
    new: list[BenchCase] = []
    for case, label in checked:
        system, sample = str(case.get("system") or run.config.get("system") or ""), str(case.get("sample_id") or "")
        source = str(case["graph"])
        if source not in copied:
            relative = Path("graphs") / _safe(system) / _safe(sample) / f"run-{_safe(run.name)}-{Path(source).stem}.json"
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run.root / source, out / relative)
            copied[source] = relative.as_posix()
        new.append(BenchCase(
            case_id=human_case_id(system, str(case.get("question_id")), run.name), system=system,
            dataset=str(case.get("dataset") or run.config.get("dataset") or ""), sample_id=sample,
            question_id=str(case.get("question_id")), question=str(case.get("question") or ""),
            gold=str(case.get("gold") or ""), prediction=str(case.get("prediction") or ""),
            evidence=tuple(str(e) for e in case.get("evidence") or ()), graph=copied[source], label=label,
            category=str(case.get("category") or ""), abstention=bool(case.get("abstention", False)),
        ))
    by_id = {c.case_id: c for c in new}
    replaced = sum(c.case_id in by_id for c in existing)
    cases = [by_id.pop(c.case_id, c) for c in existing] + list(by_id.values())
    counts = _write(out, manifest, cases, run, new[0].system)
    log.info("imported %d labels of %s into %s", len(new), run.root, out)
    return ImportSummary(out, len(new) - replaced, replaced, len(cases), counts)


def _refuse_name_clash(run: Any, manifest: dict[str, Any], out: Path) -> None:
    """Cases are named after their run (`...:human:RUN`) and replayed with its request, so two different runs
    under one directory name cannot share a bench: MemtraceError when the bench (its `manifest`) already imported
    a run of that name with another data slice or program (importing the same run again relabels it)."""
    for entry in manifest.get("imports") or []:
        if entry.get("run") == run.name and entry.get("request") not in (None, _request(run, entry.get("system"))):
            raise MemtraceError(f"{out}: it already holds a run named {run.name!r} with other data or settings; "
                                "give this run directory another name before importing it")


def _write(out: Path, manifest: dict[str, Any], cases: list[BenchCase], run: Any, system: str) -> dict[str, dict[str, int]]:
    plain = write_cases(out, cases)
    path = out / "manifest.json"
    request = _request(run, system)
    if not manifest.get("request"):  # a bench made by importing: the first run is the default replay request
        manifest["request"] = request
    imports = [i for i in manifest.get("imports") or [] if i.get("run") != run.name]
    manifest.update({"schema_version": BENCH_SCHEMA_VERSION, "kind": "memtracebench", "cases": len(cases),
                     "counts": plain, "imports": [*imports, {"run": run.name, "system": system,
                                                             "data": (run.config.get("data") or {}).get("spec"),
                                                             "request": request}]})
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return plain
