"""The human-labelled splits kept in the repository (dev, where attribution was developed; test, held out):
natural failures of the embedded model, labelled by reading their traces (docs/labelling.md). Their labels must
stay loadable, checkable against their graphs and replayable."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memtrace_opt.attribution import ERROR_TYPES, GOLD, GraphView, load_case_graph
from memtrace_opt.benchmarks.memtracebench import load_bench
from memtrace_opt.benchmarks.memtracebench.human import human_case_id, human_run

SPLITS = Path(__file__).resolve().parents[3] / "benchmarks" / "memtracebench" / "splits"
SPLIT = SPLITS / "dev"
SYSTEMS = ("long_context", "rag", "mem0", "evermemos")


@pytest.fixture(scope="module")
def split() -> tuple[Path, list]:
    return load_bench(SPLIT)


def test_the_split_has_twelve_human_labels_per_system_from_both_datasets(split: tuple[Path, list]) -> None:
    _, cases = split
    assert len(cases) >= 48 and {c.label.source for c in cases} == {"human"}
    per_system = Counter(c.system for c in cases)
    assert all(per_system[s] >= 12 for s in SYSTEMS), per_system
    assert {c.dataset for c in cases} == {"locomo", "longmemeval"}
    assert len({c.case_id for c in cases}) == len(cases)


def test_every_label_names_ops_of_its_graph_with_a_rationale(split: tuple[Path, list]) -> None:
    root, cases = split
    for case in cases:
        label = case.label
        assert label.error_type in ERROR_TYPES and label.rationale and label.by and label.at, case.case_id
        if label.error_type == GOLD:
            assert label.ops == () and label.op_id is None, case.case_id
            continue
        view = GraphView(load_case_graph(root / case.graph))
        assert label.ops and label.op_id == label.ops[0], case.case_id
        for op in label.ops:
            assert view.is_op(op), f"{case.case_id}: {op} is not an op of its graph"
        assert view.op_name(label.op_id) == label.op and label.op.startswith(case.system + "."), case.case_id


def test_every_case_replays_with_the_request_of_its_run(split: tuple[Path, list]) -> None:
    root, cases = split
    manifest = json.loads((root / "manifest.json").read_text())
    requests = {i["run"]: i["request"] for i in manifest["imports"]}
    for case in cases:
        run = human_run(case.case_id)
        assert run is not None and case.case_id == human_case_id(case.system, case.question_id, run)
        request = requests[run]
        assert request["systems"] == [case.system] and request["data"] == case.dataset, case.case_id


def test_no_suspect_changed_a_memory_before_the_evidence_was_said(split: tuple[Path, list]) -> None:
    """Causality: an op that ran before the first op to read an evidence turn cannot have lost that turn's
    information. Mem0 windows make a unit's later versions descend from evidence turns, and its earlier
    changes were once asked about first (the snakes of conv-48 blamed on the decision of an earlier window)."""
    from memtrace_opt.attribution import AttributionConfig
    from memtrace_opt.attribution.graphtrace import candidates
    from memtrace_opt.attribution.lineage import open_case

    root, cases = split
    checked = 0
    for case in cases:
        view, flow = open_case(case.failed_case(root), load_case_graph(root / case.graph), AttributionConfig(), "t")
        said = min((view.seq(op) for op in flow.consumers), default=-1)
        for change in flow.unit_changes + flow.unit_losses:
            assert view.written_at(change.after) > said, (case.case_id, change)
        for candidate in candidates(view, flow):
            if candidate.error_type in ("UpdateError", "DeletionError") and flow.consumers:
                assert view.seq(candidate.op) > said, (case.case_id, candidate)
                checked += 1
    assert checked >= 10
    snakes = next(c for c in cases if c.case_id.startswith("mem0:conv-48:q15:"))
    view, flow = open_case(snakes.failed_case(root), load_case_graph(root / snakes.graph), AttributionConfig(), "t")
    assert candidates(view, flow)[0].op == "op:26"  # the decision that dropped the extracted snakes
