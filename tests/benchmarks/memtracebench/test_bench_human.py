"""Human labels: a run's labels.jsonl imported into a bench with its graphs, any-of-ops scoring, every table per
label source, and lineage's agreement with the human labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memtrace_opt.attribution import AttributionConfig, GraphView, Verdict, load_case_graph
from memtrace_opt.benchmarks.memtracebench import (
    BenchCase,
    Label,
    eval_bench,
    load_bench,
    score_tables,
    score_verdicts,
)
from memtrace_opt.benchmarks.memtracebench.evaluate import reference_agreement
from memtrace_opt.benchmarks.memtracebench.human import human_case_id, import_labels
from memtrace_opt.errors import MemtraceError
from memtrace_opt.report import load_run
from memtrace_opt.report.demo_run import write_demo_run
from memtrace_opt.report.labels import append_label, make_label

DELETED = "mem0/demo/demo-q3"
RETRIEVAL = "mem0/demo/demo-q4"
RESPONSE = "mem0/demo/demo-q5"


@pytest.fixture
def labelled_run(tmp_path: Path) -> Path:
    root = write_demo_run(tmp_path / "run")
    run = load_run(root)
    for form in ({"case_id": DELETED, "error_type": "UpdateError", "ops": ["op:10"], "rationale": "first try"},
                 {"case_id": RETRIEVAL, "error_type": "RetrievalError", "ops": ["op:18", "op:19"], "by": "ann"},
                 {"case_id": RESPONSE, "error_type": "GoldError", "rationale": "the metric calls a right answer wrong"},
                 {"case_id": DELETED, "error_type": "DeletionError", "ops": ["op:10"], "rationale": "relabelled"}):
        append_label(root, make_label(run, form, by="tester"))
    return root


def test_import_adds_the_labelled_cases_with_their_graphs(labelled_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    summary = import_labels(labelled_run, labelled_run / "labels.jsonl", out)
    assert (summary.added, summary.replaced, summary.cases) == (3, 0, 3)
    root, cases = load_bench(out)
    by_question = {c.question_id: c for c in cases}
    deleted = by_question["demo-q3"]
    assert deleted.case_id == human_case_id("mem0", "demo-q3", "run")
    assert deleted.label == Label("DeletionError", "op:10", "mem0.update_decision", "human", ("op:10",), "relabelled",
                                  "tester", deleted.label.at)  # the latest label of the case
    assert by_question["demo-q4"].label.ops == ("op:18", "op:19") and by_question["demo-q4"].label.by == "ann"
    gold = by_question["demo-q5"].label
    assert (gold.error_type, gold.op_id, gold.ops) == ("GoldError", None, ())
    view = GraphView(load_case_graph(root / deleted.graph))  # the graph travelled with the cases
    assert view.op_name("op:10") == "mem0.update_decision" and deleted.graph.startswith("graphs/mem0/demo/")
    assert deleted.gold and deleted.prediction and deleted.evidence
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["mem0"] == {"human/DeletionError": 1, "human/GoldError": 1, "human/RetrievalError": 1}
    assert [{k: i[k] for k in ("run", "system")} for i in manifest["imports"]] == [{"run": "run", "system": "mem0"}]

    again = import_labels(labelled_run, labelled_run / "labels.jsonl", out)  # the same run again: relabelled
    assert (again.added, again.replaced, again.cases) == (0, 3, 3)


def test_a_label_naming_an_op_the_graph_lacks_refuses_the_import(labelled_run: Path, tmp_path: Path) -> None:
    labels = labelled_run / "labels.jsonl"
    with labels.open("a") as handle:
        handle.write(json.dumps({"case_id": RETRIEVAL, "error_type": "RetrievalError", "ops": ["op:18", "op:404"],
                                 "source": "human"}) + "\n")
    out = tmp_path / "bench"
    with pytest.raises(MemtraceError, match=f"case {RETRIEVAL}: its graph has no op op:404"):
        import_labels(labelled_run, labels, out)
    assert not (out / "cases.jsonl").exists()  # nothing written

    result = CliRunner().invoke(_app(), ["bench", "import", str(labelled_run), "--out", str(out)])
    assert result.exit_code != 0 and f"case {RETRIEVAL}: its graph has no op op:404" in str(result.exception)


def test_import_refuses_a_case_the_run_lacks(labelled_run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "other.jsonl"
    labels.write_text(json.dumps({"case_id": "elsewhere/q1", "error_type": "ResponseError", "ops": ["op:1"]}) + "\n")
    with pytest.raises(MemtraceError, match="case elsewhere/q1 is not a question of the run run"):
        import_labels(labelled_run, labels, tmp_path / "bench")


def _app():  # noqa: ANN202
    from memtrace_opt.cli import app

    return app


def test_bench_import_command_then_eval_reports_the_human_source(labelled_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    result = CliRunner().invoke(_app(), ["bench", "import", str(labelled_run), "--labels",
                                         str(labelled_run / "labels.jsonl"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 cases added" in result.output
    result = CliRunner().invoke(_app(), ["bench", "eval", str(out), "-m", "blame_response", "--embedder", "hash", "-q"])
    assert result.exit_code == 0, result.output
    assert "lineage (reference)" in result.output and "lineage agrees with the human labels on 3 cases" in result.output
    results = json.loads((out / "eval" / "results.json").read_text())
    assert [m["method"] for m in results["methods"]] == ["blame_response", "lineage"]
    assert results["methods"][1]["reference"] is True and results["lineage_agreement_with_human"]["n"] == 3


def _case(case_id: str, source: str, ops: tuple[str, ...], error_type: str = "UpdateError") -> BenchCase:
    label = Label(error_type, ops[0] if ops else None, "x", source, ops)
    return BenchCase(case_id, "mem0", "d", "s", case_id, "?", "g", "p", (), "g.json", label)


def _verdict(case_id: str, op_id: str | None, error_type: str = "UpdateError") -> Verdict:
    return Verdict(case_id, "m", error_type, op_id, "x", None, "", 1.0)


def test_a_verdict_is_right_when_it_names_any_acceptable_op() -> None:
    cases = [_case("a", "human", ("op:3", "op:7")), _case("b", "human", ("op:3", "op:7")), _case("c", "human", ("op:3",)),
             _case("g", "human", (), "GoldError")]
    verdicts = [_verdict("a", "op:7"), _verdict("b", "op:5"), _verdict("c", "op:7"), _verdict("g", None, "GoldError")]
    score = score_verdicts("m", cases, verdicts).overall
    assert (score.n, score.op_hits, score.type_hits) == (4, 2, 4)  # a (second op) and g (GoldError named)


def test_a_version_1_label_reads_its_op_as_the_only_acceptable_one() -> None:
    row = {"error_type": "RetrievalError", "op_id": "op:4", "op": "rag.retrieve", "source": "lineage"}
    label = Label.from_dict(row)
    assert label.ops == ("op:4",) and (label.rationale, label.by, label.at) == ("", "", "")
    assert Label.from_dict(label.to_dict()) == label
    gold = Label.from_dict({"error_type": "GoldError", "op_id": None, "op": None, "source": "human"})
    assert gold.ops == () and not gold.accepts(None)


def test_every_table_is_given_per_label_source() -> None:
    cases = [_case("i1", "injected", ("op:1",)), _case("i2", "injected", ("op:2",)), _case("l1", "lineage", ("op:3",)),
             _case("h1", "human", ("op:4", "op:5")), _case("h2", "human", ("op:6",))]
    verdicts = [_verdict("i1", "op:1"), _verdict("i2", "op:9"), _verdict("l1", "op:3"), _verdict("h1", "op:5"),
                _verdict("h2", "op:1")]
    score = score_verdicts("graphtrace", cases, verdicts)
    assert {k: (v.overall.n, v.overall.op_hits) for k, v in score.per_source.items()} == {
        "injected": (2, 1), "lineage": (1, 1), "human": (2, 1)}
    titles = [t.title for t in score_tables([score])]
    assert titles[:2] == ["MemTraceBench: attribution accuracy (all cases)", "type acc / op acc by system (all cases)"]
    assert [t for t in titles if t.startswith("source ")] == [
        "source injected: injected faults (the truth known)",
        "source lineage: natural failures labelled by lineage (silver: lineage is exact on them by construction)",
        "source human: labelled by a person"]
    assert reference_agreement([score]) is None  # graphtrace is no reference
    lineage = score_verdicts("lineage", cases, verdicts)
    assert reference_agreement([score, lineage]) == lineage.per_source["human"].overall


def test_eval_scores_lineage_on_human_labels_only_when_asked(labelled_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    import_labels(labelled_run, labelled_run / "labels.jsonl", out)
    config = AttributionConfig(embedder="hash")
    assert [s.method for s in eval_bench(out, ["blame_response"], config=config)] == ["blame_response"]
    scores = eval_bench(out, ["blame_response"], config=config, reference=True)
    assert [(s.method, s.reference) for s in scores] == [("blame_response", False), ("lineage", True)]
    assert scores[1].overall.n == 3


def test_a_split_mixing_runs_replays_each_case_with_its_own_runs_request(labelled_run: Path, tmp_path: Path) -> None:
    from memtrace_opt.attribution import FailedCase
    from memtrace_opt.benchmarks.memtracebench.evaluate import bench_replay_provider

    out = tmp_path / "bench"
    import_labels(labelled_run, labelled_run / "labels.jsonl", out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["imports"][0]["request"] == manifest["request"]  # each import keeps how to replay its cases
    # a second run of another system with other settings, imported into the same split
    manifest["request"] = {"systems": ["mem0"], "data": "sample", "settings": {"mem0": {}}}
    manifest["imports"].append({"run": "other", "system": "rag", "data": "sample",
                                "request": {"systems": ["rag"], "data": "sample", "settings": {"rag": {"top_k": 2}}}})
    (out / "manifest.json").write_text(json.dumps(manifest))
    provide = bench_replay_provider(out, [])
    theirs = provide(FailedCase(human_case_id("rag", "q1", "other"), {"question_id": "q1", "question": "?"},
                                "g", "p", system="rag", sample_id="sample-1"))
    default = provide(FailedCase("mem0:q2:injected", {"question_id": "q2", "question": "?"}, "g", "p",
                                 system="mem0", sample_id="sample-1"))
    assert theirs.program.config.top_k == 2 and theirs.conversation.sample_id == "sample-1"
    assert type(default.program).__name__ != type(theirs.program).__name__


def test_a_different_run_under_a_name_the_bench_holds_is_refused(labelled_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    import_labels(labelled_run, labelled_run / "labels.jsonl", out)
    other = write_demo_run(tmp_path / "elsewhere" / "run")  # same directory name, another program setting
    config = other / "config.yaml"
    config.write_text(config.read_text().replace("top_k: 10", "top_k: 3"))
    run = load_run(other)
    append_label(other, make_label(run, {"case_id": RESPONSE, "error_type": "GoldError"}, by="tester"))
    before = (out / "cases.jsonl").read_text()
    with pytest.raises(MemtraceError, match="already holds a run named 'run' with other data or settings"):
        import_labels(other, other / "labels.jsonl", out)
    assert (out / "cases.jsonl").read_text() == before
    import_labels(labelled_run, labelled_run / "labels.jsonl", out)  # the same run again still relabels
