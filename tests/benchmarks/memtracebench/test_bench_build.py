"""MemTraceBench on the packaged sample with the fake task LM: injection with replay, labels, storage, scores."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from memtrace_opt.attribution import AttributionConfig, GraphView, Verdict, load_case_graph
from memtrace_opt.attribution.runs import read_verdicts
from memtrace_opt.benchmarks.memtracebench import (
    BENCH_SCHEMA_VERSION,
    BenchCase,
    BuildRequest,
    Label,
    build_bench,
    eval_bench,
    load_bench,
    score_verdicts,
)
from memtrace_opt.data import Question
from memtrace_opt.metrics.score import score_answer
from memtrace_opt.testing import FakeEngine, fake_lm
from memtrace_opt.testing.skills import default_skills

DESIGN_KEYS = {"case_id", "system", "dataset", "sample_id", "question_id", "question", "gold", "prediction",
               "evidence", "graph", "label", "injection"}
LABEL_KEYS = {"error_type", "op_id", "op", "source", "ops", "rationale", "by", "at"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    pr28 = out / "pr28.jsonl"  # a made-up answer-key fix: the sample's "Chemistry" question had a wrong key
    pr28.write_text(json.dumps({"sample_id": "sample-1", "qa_index": 1,
                                "upstream": {"answer": "Physics"}, "pr28": {"answer": "Chemistry"}}) + "\n")
    task = fake_lm(engine=FakeEngine(skills=default_skills()), name="fake/bench-task")
    request = BuildRequest(systems=("mem0", "rag"), out=out / "b", data="sample", per_kind=1, embedder="hash",
                           settings={"mem0": {"embedder": "hash"}, "rag": {"embedder": "hash"}}, pr28_path=pr28)
    summary = build_bench(request, task_lm=task)
    return summary


def test_the_bench_holds_every_source_in_the_design_format(bench) -> None:
    root, cases = load_bench(bench.out)
    assert len(cases) == bench.cases > 0
    rows = [json.loads(line) for line in (root / "cases.jsonl").read_text().splitlines()]
    assert all(DESIGN_KEYS <= set(row) and set(row["label"]) == LABEL_KEYS for row in rows)
    assert {c.label.source for c in cases} == {"injected", "lineage", "human"}
    injected = {c.label.error_type for c in cases if c.label.source == "injected"}
    assert {"ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError"} <= injected
    assert bench.counts["mem0"]["human/GoldError"] == 1
    assert all(BenchCase.from_dict(c.to_dict()) == c for c in cases)


def test_injected_cases_fail_at_the_perturbed_op(bench) -> None:
    root, cases = load_bench(bench.out)
    for case in (c for c in cases if c.label.source == "injected"):
        view = GraphView(load_case_graph(root / case.graph))
        assert view.op_name(case.label.op_id) == case.label.op == case.injection.op
        assert view.attrs(case.label.op_id).get("replayed") == "forced"
        question = Question(case.question_id, case.question, case.gold, case.category, None, case.evidence,
                            abstention=case.abstention)
        assert not score_answer(question, case.prediction).correct_by_rule


def test_gold_error_cases_keep_the_original_answer_key(bench) -> None:
    _, cases = load_bench(bench.out)
    found = [c for c in cases if c.label.source == "human"]
    assert {c.system for c in found} == {"mem0", "rag"}
    gold = found[0]
    assert (gold.label.error_type, gold.label.op_id, gold.label.ops, gold.label.source) == ("GoldError", None, (), "human")
    assert "'Physics' -> 'Chemistry'" in gold.label.rationale and gold.label.by == "LoCoMo PR #28"
    assert gold.gold == "Physics" and "chemistry" in gold.prediction.lower()


def test_the_hf_dataset_matches_the_jsonl(bench) -> None:
    import datasets

    table = datasets.load_from_disk(str(bench.out / "hf"))
    _, cases = load_bench(bench.out)
    assert table.num_rows == len(cases)
    assert table[0]["case_id"] == cases[0].case_id
    assert json.loads(table[0]["label"]) == cases[0].label.to_dict()
    manifest = json.loads((bench.out / "manifest.json").read_text())
    assert manifest["schema_version"] == BENCH_SCHEMA_VERSION and manifest["cases"] == len(cases)


def test_eval_scores_methods_against_the_labels(bench) -> None:
    [lineage, blame] = eval_bench(bench.out, ["lineage", "blame_response"], config=AttributionConfig(embedder="hash"))
    assert lineage.by_source["injected"].rate(lineage.by_source["injected"].both_hits) >= 0.8
    assert lineage.overall.n == blame.overall.n == bench.cases
    assert blame.by_type["ResponseError"].rate(blame.by_type["ResponseError"].type_hits) == 1.0
    assert blame.by_type["RetrievalError"].type_hits == 0
    assert sum(sum(row.values()) for row in lineage.confusion.values()) == bench.cases
    results = json.loads((bench.out / "eval" / "results.json").read_text())
    assert [m["method"] for m in results["methods"]] == ["lineage", "blame_response"]
    assert (bench.out / "eval" / "lineage.jsonl").read_text().count("\n") == bench.cases


def test_scoring_counts_a_missing_verdict_as_wrong() -> None:
    case = BenchCase("c", "mem0", "d", "s", "q", "?", "g", "p", (), "g.json", Label("RetrievalError", "op:3", "x", "injected"))
    right = Verdict("c", "m", "RetrievalError", "op:3", "x", None, "", 1.0)
    wrong_op = Verdict("c", "m", "RetrievalError", "op:4", "x", None, "", 1.0)
    assert score_verdicts("m", [case], [right]).overall.both_hits == 1
    score = score_verdicts("m", [case], [wrong_op]).overall
    assert (score.type_hits, score.op_hits) == (1, 0)
    assert score_verdicts("m", [case], []).overall.type_hits == 0


def test_bench_eval_command(bench) -> None:
    from memtrace_opt.cli import app

    result = CliRunner().invoke(app, ["bench", "eval", str(bench.out), "-m", "lineage", "-m", "random",
                                      "--embedder", "hash", "-q"])
    assert result.exit_code == 0, result.output
    assert "MemTraceBench: attribution accuracy" in result.output and "confusion (lineage, source injected)" in result.output
    for source in ("injected", "lineage", "human"):  # every table per label source
        assert f"source {source}:" in result.output and f"by system (source {source})" in result.output
    assert "lineage agrees with the human labels on 2 cases" in result.output  # the GoldError cases


def test_counterfactual_replays_bench_cases_with_their_injection(bench) -> None:
    from memtrace_opt.benchmarks.memtracebench.evaluate import bench_replay_provider

    root, cases = load_bench(bench.out)
    injected = [c for c in cases if c.label.source == "injected"]
    provide = bench_replay_provider(root, cases)
    context = provide(injected[0].failed_case(root))
    assert context is not None and context.conversation.sample_id == injected[0].sample_id
    assert context.forced == {injected[0].injection.seq: injected[0].injection.forced}
    assert context.program.name == injected[0].system

    task = fake_lm(engine=FakeEngine(skills=default_skills()), name="fake/bench-task")
    attributor = fake_lm(engine=FakeEngine(skills=default_skills()), name="fake/bench-attributor")
    limit = cases.index(injected[-1]) + 1
    [score] = eval_bench(bench.out, ["counterfactual"], lm=attributor, task_lm=task,
                         config=AttributionConfig(embedder="hash"), limit=limit)
    lines = (bench.out / "eval" / "counterfactual.jsonl").read_text().splitlines()
    reasons = [json.loads(line)["reason"] for line in lines]
    assert not any("no replay context" in reason for reason in reasons)
    # each injected failure is reproduced by the replay (the fault forced again), and the repair of the
    # perturbed op (or, for a response fault, no repair upstream) gives back the right answer
    injected_score = score.by_source["injected"]
    assert injected_score.n == len(injected) and injected_score.both_hits == len(injected)
    confirmed = [r for r, c in zip(reasons, cases[:limit], strict=True)
                 if c.label.source == "injected" and c.label.error_type != "ResponseError"]
    assert confirmed and all(r.startswith("repairing ") and r.endswith("which is correct") for r in confirmed)


def test_bench_build_command_keeps_the_slice(tmp_path) -> None:
    from memtrace_opt.cli import app

    out = tmp_path / "b"
    result = CliRunner().invoke(app, ["bench", "build", "--out", str(out), "-s", "rag", "--data", "sample",
                                      "--sessions", "1-2", "--limit", "3", "--lm", "fake", "--program-embedder", "hash",
                                      "--embedder", "hash", "--no-gold", "-q"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["request"]["slice"]["sessions"] == [1, 2] and manifest["request"]["slice"]["limit"] == 3
    _, cases = load_bench(out)
    assert len({c.question_id for c in cases}) <= 3


def test_a_stopped_eval_keeps_its_verdicts_and_resumes_where_it_stopped(bench, tmp_path) -> None:
    import shutil

    root = tmp_path / "b"
    shutil.copytree(bench.out, root)
    shutil.rmtree(root / "eval", ignore_errors=True)
    config = AttributionConfig(embedder="hash")
    seen: list[int] = []

    def stop_after_two(method: str, done: int, total: int) -> None:
        seen.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        eval_bench(root, ["lineage"], config=config, progress=stop_after_two)
    path = root / "eval" / "lineage.jsonl"
    assert len(path.read_text().splitlines()) == 2  # written as each case ended
    with path.open("a") as handle:
        handle.write('{"case_id": "half a li')  # and a crash in the middle of the third line

    seen.clear()
    [resumed] = eval_bench(root, ["lineage"], config=config, progress=lambda m, done, total: seen.append(done))
    assert seen == list(range(3, bench.cases + 1))  # the two finished cases were not attributed again
    lines = path.read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == [c.case_id for c in load_bench(root)[1]]
    [fresh] = eval_bench(bench.out, ["lineage"], config=config, fresh=True)
    assert (resumed.overall, resumed.confusion) == (fresh.overall, fresh.confusion)


def test_a_fresh_eval_redoes_every_case_and_a_rebuild_drops_old_verdicts(bench, tmp_path) -> None:
    import shutil

    from memtrace_opt.benchmarks.memtracebench.build import _write

    root = tmp_path / "b"
    shutil.copytree(bench.out, root)
    config = AttributionConfig(embedder="hash")
    eval_bench(root, ["lineage"], config=config)
    seen: list[int] = []
    eval_bench(root, ["lineage"], config=config, fresh=True, progress=lambda m, done, total: seen.append(done))
    assert len(seen) == bench.cases
    request = BuildRequest(systems=("mem0",), out=root, data="sample", embedder="hash")
    _write(root, load_bench(root)[1][:1], request, 0.0)
    assert not (root / "eval").exists()


def test_scoring_a_subset_keeps_the_verdicts_on_the_other_cases(bench, tmp_path) -> None:
    import shutil

    root = tmp_path / "b"
    shutil.copytree(bench.out, root)
    shutil.rmtree(root / "eval", ignore_errors=True)
    config = AttributionConfig(embedder="hash")
    ids = [c.case_id for c in load_bench(root)[1]]
    assert len(ids) >= 2
    eval_bench(root, ["lineage"], config=config)  # every case
    [first] = eval_bench(root, ["lineage"], config=config, case_ids=ids[:1])  # then one of them alone
    assert first.overall.n == 1
    lines = (root / "eval" / "lineage.jsonl").read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in lines] == ids  # the others were not dropped
    seen: list[int] = []
    eval_bench(root, ["lineage"], config=config, progress=lambda m, done, total: seen.append(done))
    assert seen == []  # nothing to attribute again


def test_hidden_gold_evidence_sends_the_methods_to_pseudo_evidence_in_their_own_directory(bench, tmp_path) -> None:
    import shutil

    from memtrace_opt.cli import app

    root = tmp_path / "b"
    shutil.copytree(bench.out, root)
    shutil.rmtree(root / "eval", ignore_errors=True)
    config = AttributionConfig(embedder="hash")
    cases = load_bench(root)[1]
    assert any(c.evidence for c in cases)
    eval_bench(root, ["lineage"], config=config)
    shown = {v.case_id: v for v in read_verdicts(root / "eval" / "lineage.jsonl")}
    result = CliRunner().invoke(app, ["bench", "eval", str(root), "-m", "lineage", "--embedder", "hash",
                                      "--no-gold-evidence", "-q"])
    assert result.exit_code == 0, result.output
    hidden = {v.case_id: v for v in read_verdicts(root / "eval-pseudo" / "lineage.jsonl")}
    assert set(hidden) == set(shown) == {c.case_id for c in cases}
    for case in cases:
        if case.evidence:
            assert "evidence: gold" in shown[case.case_id].reason
            assert "evidence: pseudo" in hidden[case.case_id].reason
    assert {v.case_id: v for v in read_verdicts(root / "eval" / "lineage.jsonl")} == shown  # eval/ untouched
