"""The human-labelled splits kept in the repository: `dev`, where attribution was developed and tuned, and `test`,
held out (labelled before any method ran on it, never tuned on). Both are natural failures of the embedded model,
labelled by reading their traces (docs/labelling.md). Their labels must stay loadable, checkable against their
graphs and replayable, and the two must share no conversation or question. The test split has no EverMemOS case
yet (docs/labelling.md): its systems and (dataset, system) pairs are listed apart until they come."""

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
DATASETS = ("locomo", "longmemeval")
LEAST = {"dev": 48, "test": 62}  # cases at least
# the (dataset, system) pairs each split holds: on test, Mem0 ran on LoCoMo only so far
PAIRS = {"dev": {(d, s) for d in DATASETS for s in SYSTEMS},
         "test": {("locomo", "long_context"), ("locomo", "rag"), ("locomo", "mem0"), ("locomo", "evermemos"),
                  ("longmemeval", "long_context"), ("longmemeval", "rag"), ("longmemeval", "evermemos")}}
# the samples attribution was developed on before the dev split existed (docs/labelling.md)
DEVELOPED_ON = {"conv-26", "66f24dbb", "0f05491a", "8077ef71", "9aaed6a3"}


@pytest.fixture(scope="module")
def split() -> tuple[Path, list]:
    return load_bench(SPLIT)


@pytest.fixture(scope="module", params=("dev", "test"))
def labelled(request: pytest.FixtureRequest) -> tuple[str, Path, list]:
    root, cases = load_bench(SPLITS / request.param)
    return request.param, root, cases


def test_the_dev_split_has_twelve_human_labels_per_system(split: tuple[Path, list]) -> None:
    _, cases = split
    per_system = Counter(c.system for c in cases)
    assert all(per_system[s] >= 12 for s in SYSTEMS), per_system


def test_each_split_has_human_labels_of_its_systems_from_both_datasets(labelled: tuple[str, Path, list]) -> None:
    name, _, cases = labelled
    assert len(cases) >= LEAST[name] and {c.label.source for c in cases} == {"human"}
    assert {c.dataset for c in cases} == set(DATASETS)
    assert {(c.dataset, c.system) for c in cases} == PAIRS[name]
    assert len({c.case_id for c in cases}) == len(cases)


def test_every_label_names_ops_of_its_graph_with_a_rationale(labelled: tuple[str, Path, list]) -> None:
    _, root, cases = labelled
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


def test_every_case_replays_with_the_request_of_its_run(labelled: tuple[str, Path, list]) -> None:
    _, root, cases = labelled
    manifest = json.loads((root / "manifest.json").read_text())
    requests = {i["run"]: i["request"] for i in manifest["imports"]}
    for case in cases:
        run = human_run(case.case_id)
        assert run is not None and case.case_id == human_case_id(case.system, case.question_id, run)
        request = requests[run]
        assert request["systems"] == [case.system] and request["data"] == case.dataset, case.case_id


def test_dev_and_test_share_no_conversation_or_question() -> None:
    dev, test = (load_bench(SPLITS / name)[1] for name in ("dev", "test"))
    assert not {(c.dataset, c.sample_id) for c in dev} & {(c.dataset, c.sample_id) for c in test}
    assert not {c.question_id for c in dev} & {c.question_id for c in test}
    assert not {c.sample_id for c in dev + test} & DEVELOPED_ON


def test_the_test_split_is_what_split_test_scores(tmp_path: Path) -> None:
    """`bench_attribution.py --split test` copies the repository's test split under --out and scores all of it
    (the constant blame_response baseline: no LM, nothing tuned on it)."""
    from memtrace_opt.benchmarks.bench_attribution import main

    _, cases = load_bench(SPLITS / "test")
    out = tmp_path / "out"
    main(["--lm", "fake", "--split", "test", "--embedder", "hash", "--methods", "blame_response", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert results["split"] == "test" and results["cases"] == len(cases)
    assert sorted(results["case_ids"]) == sorted(c.case_id for c in cases)
    assert load_bench(out / "test")[1] == cases and not (SPLITS / "test" / "eval").exists()


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
