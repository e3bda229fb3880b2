"""The attribution benchmark script: the case sample it scores, and a dry run with the fake LM."""

from __future__ import annotations

import json

import pytest

from memtrace_opt.benchmarks.bench_attribution import main, pick
from memtrace_opt.benchmarks.memtracebench import BenchCase, Label


def _case(i: int, system: str, kind: str, source: str = "injected", dataset: str = "d") -> BenchCase:
    return BenchCase(f"c{i}", system, dataset, "s", f"q{i}", "?", "g", "p", (), "g.json", Label(kind, "op:1", "x", source))


def test_pick_spreads_the_sample_over_systems_and_error_types():
    cases = [_case(i, "mem0", "ExtractionError") for i in range(6)] + [
        _case(10, "rag", "RetrievalError"), _case(11, "mem0", "UpdateError"), _case(12, "rag", "ResponseError")]
    chosen = pick(cases, 4)
    assert len(chosen) == 4
    assert {(c.system, c.label.error_type) for c in chosen} == {
        ("mem0", "ExtractionError"), ("rag", "RetrievalError"), ("mem0", "UpdateError"), ("rag", "ResponseError")}
    assert [c.case_id for c in chosen] == sorted((c.case_id for c in chosen), key=lambda i: int(i[1:]))  # bench order
    assert pick(cases, None) == cases and pick(cases, 50) == cases


def test_a_small_pick_reaches_every_system_and_dataset_before_a_second_error_type():
    kinds = ("RetrievalError", "ResponseError", "ExtractionError")
    cases = [_case(10 * s + k, system, kind, dataset=dataset)
             for s, (dataset, system) in enumerate([("locomo", "long_context"), ("locomo", "rag"), ("locomo", "mem0"),
                                                    ("locomo", "evermemos"), ("longmemeval", "rag")])
             for k, kind in enumerate(kinds)]
    chosen = pick(cases, 6)
    assert {(c.dataset, c.system) for c in chosen} == {(c.dataset, c.system) for c in cases}
    assert [c.label.error_type for c in chosen].count("RetrievalError") == 5  # each owner's first group first


def test_the_cost_target_reads_the_attributors_calls_with_the_replays_beside_it():
    from memtrace_opt.attribution import Cost, Verdict
    from memtrace_opt.benchmarks.bench_attribution import score_method, table, targets

    kinds = ("ExtractionError", "RetrievalError", "ResponseError", "UpdateError")
    cases = [BenchCase(f"c{i}", "mem0", "d", "s", f"q{i}", "?", "g", "p", (), "g.json",
                       Label(kind, f"op:{i}", "x", "injected")) for i, kind in enumerate(kinds)]
    # attributor calls 4, 6, 5, 3; replayed calls 6, 10, 4, 0; confirmed True, False, None (on the answer op:
    # not upstream), and an older line (no replay fields, untested)
    costs = [Cost(4, 2000, 100, 1.0, 6, 3000, 90), Cost(6, 3000, 200, 1.0, 10, 5000, 150),
             Cost(5, 2500, 150, 1.0, 4, 2000, 60)]
    verdicts = [Verdict(c.case_id, "graphtrace", c.label.error_type, c.label.op_id, "x", None, "r", 0.8, cost, None,
                        confirmed) for c, cost, confirmed in zip(cases[:3], costs, (True, False, None), strict=True)]
    verdicts.append(Verdict.from_dict({**verdicts[0].to_dict(), "case_id": "c3", "error_type": "UpdateError",
                                       "op_id": "op:3", "confirmed": None, "replays": None,
                                       "cost": {"lm_calls": 3, "prompt_tokens": 900, "completion_tokens": 60}}))
    scored = score_method("graphtrace", cases, verdicts, 12.0)
    assert (scored["median_lm_calls"], scored["median_replay_calls"], scored["total_replay_calls"]) == (4.5, 5, 20)
    assert scored["confirmed"] == {"true": 1, "false": 1, "none": 1, "upstream": 3, "share": 0.3333}
    results = {"methods": {"graphtrace": scored}}
    checks = dict(targets(results))
    # attributor and replays together would be a median of 9.5 calls a case: over the target, which is on the
    # attributor's questions alone (4.5)
    line = "graphtrace median 4.5 attributor LM calls <= 8 per case (replays apart: median 5 task-model calls a case)"
    assert checks[line] is True
    assert checks["graphtrace median 2375 attributor tokens <= 12k per case"] is True
    text = table(results)
    assert "| median LM calls | median tokens | LM calls total | median replayed calls | replayed calls total |" in text
    assert "| 4.5 | 2375 | 18 | 5 | 20 | 33% (1 / 1 / 1) |" in text
    older = {**scored, "median_lm_calls": 3}
    for key in ("median_replay_calls", "total_replay_calls", "confirmed"):
        older.pop(key)  # a score saved before the replays were reported
    assert "| 3 | 2375 | 18 | - | - | - |" in table({"methods": {"graphtrace": older}})


def test_dry_run_scores_every_method_and_saves_the_table(tmp_path):
    out = tmp_path / "attr"
    status = main(["--lm", "fake", "--data", "sample", "--embedder", "hash", "--systems", "mem0",
                   "--methods", "lineage,graphtrace,blame_response", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert set(results["methods"]) == {"lineage", "graphtrace", "blame_response"}
    graphtrace = results["methods"]["graphtrace"]
    assert graphtrace["injected"]["n"] == results["cases"] > 0
    assert 0.0 <= graphtrace["injected"]["op_acc"] <= 1.0
    # graphtrace confirmed its upstream verdicts by replay: the task model's calls are reported apart
    assert graphtrace["total_replay_calls"] > 0 and graphtrace["confirmed"]["upstream"] > 0
    assert results["methods"]["lineage"]["total_replay_calls"] == 0
    assert "| graphtrace |" in (out / "results.md").read_text()
    assert status == (0 if all(t["met"] for t in results["targets"]) else 1)
    # a second run on the same bench scores another method and keeps the first run's scores beside it
    main(["--lm", "fake", "--data", "sample", "--embedder", "hash", "--eval-only", "--methods", "random",
          "--out", str(out)])
    again = json.loads((out / "results.json").read_text())
    assert set(again["methods"]) == {"lineage", "graphtrace", "blame_response", "random"}
    assert again["methods"]["graphtrace"] == graphtrace


def _human_split(tmp_path):
    from memtrace_opt.benchmarks.memtracebench.human import import_labels
    from memtrace_opt.report import load_run
    from memtrace_opt.report.demo_run import write_demo_run
    from memtrace_opt.report.labels import append_label, make_label

    root = write_demo_run(tmp_path / "run")
    run = load_run(root)
    for form in ({"case_id": "mem0/demo/demo-q3", "error_type": "DeletionError", "ops": ["op:10"],
                  "rationale": "op:10 deleted 'works at the Quillfeather Bookshop'"},
                 {"case_id": "mem0/demo/demo-q4", "error_type": "RetrievalError", "ops": ["op:18", "op:19"]},
                 {"case_id": "mem0/demo/demo-q5", "error_type": "ResponseError", "ops": ["op:21"]}):
        append_label(root, make_label(run, form, by="tester"))
    import_labels(root, root / "labels.jsonl", tmp_path / "split")
    return tmp_path / "split"


def test_the_dev_split_is_scored_with_its_targets_and_misses(tmp_path):
    split = _human_split(tmp_path)
    out = tmp_path / "attr"
    status = main(["--lm", "fake", "--split", "dev", "--split-dir", str(split), "--embedder", "hash",
                   "--methods", "lineage,graphtrace,blame_response,all_at_once", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert results["split"] == "dev" and results["cases"] == 3
    assert (out / "dev" / "cases.jsonl").is_file()  # the copy scored, named after the split
    assert not (split / "eval").exists()  # verdicts go under --out, not into the split kept in the repository
    blame = results["methods"]["blame_response"]
    # right on the response failure; on the retrieval one it names op:19 (the answer op), one of the two acceptable
    # ops, with the wrong error type
    assert blame["human"] == {"n": 3, "type_acc": 1 / 3, "op_acc": 2 / 3}
    assert [m["case_id"].split(":")[1] for m in blame["misses_human"]] == ["demo-q3", "demo-q4"]
    assert blame["misses_human"][0]["label"]["rationale"].startswith("op:10 deleted")
    lines = [t["target"] for t in results["targets"]]
    assert any(line.startswith("graphtrace op-level on human labels") for line in lines)
    assert any(line.startswith("graphtrace above lineage by") for line in lines)
    assert any(line.startswith("graphtrace beats all_at_once by") for line in lines)
    assert not any("injected" in line for line in lines)
    text = (out / "results.md").read_text()
    assert "op acc (hum)" in text and "## Misses on the human labels" in text and "### blame_response: 2 missed" in text
    assert "the human-labelled dev split" in text
    assert status == (0 if all(t["met"] for t in results["targets"]) else 1)


@pytest.mark.parametrize(("flag", "name"), [("human", "dev"), ("test", "test")])
def test_the_old_name_human_scores_dev_and_test_is_scored_as_its_own_split(tmp_path, flag, name):
    split = _human_split(tmp_path)
    out = tmp_path / "attr"
    main(["--lm", "fake", "--split", flag, "--split-dir", str(split), "--embedder", "hash", "--methods",
          "lineage,graphtrace", "--out", str(out)])
    results = json.loads((out / "results.json").read_text())
    assert results["split"] == name and results["methods"]["graphtrace"]["human"]["n"] == 3
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [name]  # the copy is named after the split
    assert any(t["target"].startswith("graphtrace op-level on human labels") for t in results["targets"])
    assert f"the human-labelled {name} split" in (out / "results.md").read_text()


def test_a_missing_labelled_split_is_one_line(tmp_path):
    for split in ("dev", "test"):
        with pytest.raises(SystemExit, match="no labelled split"):
            main(["--lm", "fake", "--split", split, "--split-dir", str(tmp_path / "none"), "--out", str(tmp_path / "o")])


def test_each_labelled_split_defaults_to_the_repository_copy():
    from memtrace_opt.benchmarks import bench_attribution

    assert bench_attribution.SPLITS_DIR.name == "splits" and bench_attribution.SPLIT_ALIASES == {"human": "dev"}
    assert (bench_attribution.SPLITS_DIR / "dev" / "cases.jsonl").is_file()


@pytest.mark.parametrize("judged", [False, True])
def test_judge_lm_gives_the_methods_a_judge_for_their_gold_tests(tmp_path, monkeypatch, judged):
    import memtrace_opt.benchmarks.bench_attribution as script
    from memtrace_opt.attribution import LMAnswerJudge

    given = []
    real = script.eval_bench

    def spy(*args, **kwargs):
        given.append(kwargs.get("judge"))
        return real(*args, **kwargs)

    monkeypatch.setattr(script, "eval_bench", spy)
    split, out = _human_split(tmp_path), tmp_path / "attr"
    main(["--lm", "fake", "--split", "dev", "--split-dir", str(split), "--embedder", "hash", "--methods", "lineage",
          "--out", str(out), *(["--judge-lm", "fake"] if judged else [])])
    assert given and all(isinstance(j, LMAnswerJudge) if judged else j is None for j in given)
    results = json.loads((out / "results.json").read_text())
    assert results["models"]["judge"] == ("fake" if judged else None)
    assert ("judge fake" in (out / "results.md").read_text()) == judged


@pytest.mark.parametrize("asked", [False, True])
def test_the_judges_gold_evidence_test_runs_only_with_judge_evidence(tmp_path, monkeypatch, asked):
    import memtrace_opt.benchmarks.bench_attribution as script

    configs = []
    real = script.eval_bench

    def spy(*args, **kwargs):
        configs.append(kwargs["config"])
        return real(*args, **kwargs)

    monkeypatch.setattr(script, "eval_bench", spy)
    split, out = _human_split(tmp_path), tmp_path / "attr"
    main(["--lm", "fake", "--split", "dev", "--split-dir", str(split), "--embedder", "hash", "--methods", "lineage",
          "--judge-lm", "fake", "--out", str(out), *(["--judge-evidence"] if asked else [])])
    assert configs and all(c.judge_evidence is asked for c in configs)
    assert json.loads((out / "results.json").read_text())["judge_evidence"] is asked
    assert ("gold-evidence test" in (out / "results.md").read_text()) == asked


def test_judge_evidence_without_a_judge_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--lm", "fake", "--split", "dev", "--judge-evidence", "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 2 and "--judge-evidence asks the judge" in capsys.readouterr().err


def test_case_ticker_prints_every_fifth_case_the_last_and_any_slow_one(capsys: pytest.CaptureFixture[str]) -> None:
    from memtrace_opt.benchmarks.bench_attribution import case_ticker

    now = [0.0]
    tick = case_ticker("test", every=5, quiet_s=60.0, clock=lambda: now[0])
    for done, at in [(1, 10.0), (2, 20.0), (3, 95.0), (4, 100.0), (5, 110.0), (6, 111.0), (7, 112.0)]:
        now[0] = at
        tick("graphtrace", done, 7)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["  [test] graphtrace 3/7 (95 s since the last line)", "  [test] graphtrace 5/7",
                     "  [test] graphtrace 7/7"]


def test_systems_keeps_only_their_cases_of_a_labelled_split(tmp_path):
    split = _human_split(tmp_path)  # three mem0 cases
    for systems, cases in (("rag,evermemos", 0), ("mem0", 3)):
        out = tmp_path / f"attr-{cases}"
        main(["--lm", "fake", "--split", "dev", "--split-dir", str(split), "--embedder", "hash", "--methods",
              "lineage", "--systems", systems, "--out", str(out)])
        assert json.loads((out / "results.json").read_text())["cases"] == cases
