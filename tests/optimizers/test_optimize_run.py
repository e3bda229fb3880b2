"""`memtrace optimize` and `memtrace compare` end to end with the fake LM: the run directory and the table."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml
from optfixtures import EXTRACT, FIXED, make_models
from toydata import write_locomo

from memtrace_opt.cli import main
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import LoopSettings, instructions_of, load_optimized, save_program
from memtrace_opt.optimizers.comparison.compare import CompareRequest, compare_optimizers
from memtrace_opt.optimizers.core.program_io import changed_prompts
from memtrace_opt.optimizers.optimize import OptimizeRequest, optimize_system
from memtrace_opt.programs import make_program
from memtrace_opt.rundir import RunDir


def test_optimize_writes_a_loadable_run(tmp_path, fake_models, planted):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))  # toy-c: the same conversation as toy-a, to validate on
    start = save_program(planted, tmp_path / "start.json")
    out = tmp_path / "run"
    request = OptimizeRequest(
        system="mem0", data=str(data), out=out, train="toy-a", val="toy-c", test="toy-b", program_path=start,
        settings=LoopSettings.of(rounds=3, candidates=2, minibatch=5, repairs=0), attribution="lineage",
    )
    summary = optimize_system(request, models=models)
    assert summary.best_val > summary.baseline_val
    assert summary.test_optimized is not None and summary.test_optimized > summary.test_baseline
    run = RunDir(out)
    manifest = run.read_manifest()
    assert manifest["kind"] == "optimize" and manifest["rounds"][0]["chosen_predictor"] == EXTRACT
    assert manifest["test"]["optimized_accuracy"] == summary.test_optimized
    cases = run.read_cases()
    assert len(cases) == 9 and all(c.sample_id == "toy-b" for c in cases)
    assert all("baseline_correct" in c.extra for c in cases)
    assert (out / "graphs" / "toy-b.json").is_file() and (out / "optuna.db").is_file()
    assert (out / "report.html").is_file()
    assert yaml.safe_load((out / "config.yaml").read_text())["splits"]["test"]["conversations"] == ["toy-b"]
    splits = manifest["splits"]  # which data was dev and which held out, recorded
    assert splits["mode"] == "conversations" and splits["shared_conversations"] == {} and splits["note"] is None
    assert {name: (splits[name]["conversations"], splits[name]["questions"]) for name in ("train", "val", "test")} \
        == {"train": (["toy-a"], 9), "val": (["toy-c"], 9), "test": (["toy-b"], 9)}
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    rounds = [v for v in verdicts if "round" in v]  # the optimizer's, on its training minibatches
    assert rounds and all(v["round"] >= 1 for v in rounds)
    # then the optimized program's held-out failures, attributed with the run's LM-free method
    held_out = {v["case_id"] for v in verdicts if "round" not in v}
    assert held_out == {c.case_id for c in cases if not c.correct}
    assert sum(manifest["test"]["blame"]["ops"].values()) == len(held_out)
    assert instructions_of(load_optimized(out))[EXTRACT] == FIXED


def test_cli_quick_preset_and_run_with_the_program(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(["optimize", "--system", "rag", "--lm", "fake", "--preset", "quick", "--no-local-check", "--demos", "1",
          "--validate-ties", "--min-val-gain", "0.1", "--out", "opt"])
    assert (tmp_path / "opt" / "program.json").is_file()
    config = yaml.safe_load((tmp_path / "opt" / "config.yaml").read_text())
    assert config["optimizer"]["settings"]["local_check"] is False  # the flags reached the loop
    assert config["optimizer"]["settings"]["demos"] == 1 and config["optimizer"]["settings"]["validate_ties"]
    assert config["optimizer"]["settings"]["min_val_gain"] == 0.1
    assert config["optimizer"]["settings"]["budget"] == 60  # and the preset's settings stayed
    manifest = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    assert manifest["optimizer"]["lm_calls"] <= 60 and "baseline" in manifest
    assert json.loads((tmp_path / "opt" / "program.json").read_text())["memtrace"]["system"] == "rag"
    main(["run", "--system", "rag", "--lm", "fake", "--program", "opt/program.json", "--no-judge", "-q",
          "--out", "again"])
    assert (tmp_path / "again" / "cases.jsonl").is_file()
    assert "valset" in capsys.readouterr().out


def test_compare_writes_table_json_and_plot(tmp_path, fake_models):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("memtrace", "bootstrap", "blame_response"), budget=20,
                             attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    summary = compare_optimizers(request, models=models)
    assert [r.optimizer for r in summary.rows] == ["memtrace", "bootstrap", "blame_response"]
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert all(row["lm_calls"] <= 20 for row in table["rows"])
    assert [(table["splits"][n]["conversations"], table["splits"][n]["questions"]) for n in ("train", "val", "test")] \
        == [(["toy-a"], 9), (["toy-b"], 9), (["toy-c"], 9)]  # the three lists the rows were made with
    ours = table["rows"][0]["details"]  # our loop's rounds are kept: what it blamed and what it tried
    assert {"baseline", "rounds"} <= set(ours) and 0.0 <= ours["baseline"]["val_accuracy"] <= 1.0
    assert "interrupted" not in ours  # no round started that its 20 calls could not finish
    assert all(row["cached_calls"] >= 0 for row in table["rows"])
    assert all({"blame_counts", "chosen_predictor", "candidates"} <= set(r) for r in ours["rounds"])
    assert table["rows"][1]["details"] == {}
    for row in table["rows"]:  # each row compared question by question with the baseline
        paired = row["paired"]
        assert paired["n"] == summary.test_questions
        assert (len(paired["fixed"]) - len(paired["broken"])) / paired["n"] == pytest.approx(row["delta"])
        assert paired["low"] <= row["delta"] <= paired["high"]
        answers = row["answers"]  # the held-out answers' F1 and length, from the same baseline for every row
        assert answers["f1_before"] == table["rows"][0]["answers"]["f1_before"]
        assert 0.0 <= answers["f1_after"] <= 1.0 and answers["words_after"] > 0
        if not row["changed_predictors"]:
            assert (answers["f1_after"], answers["words_after"]) == (answers["f1_before"], answers["words_before"])
    assert "| memtrace |" in (tmp_path / "cmp" / "compare.md").read_text()
    assert "| fixed / broken | 95% CI, p | mean F1 | words |" in (tmp_path / "cmp" / "compare.md").read_text()
    for row in summary.rows:  # every optimizer's program, ready to deploy, with the prompts it ended with
        program = load_optimized(tmp_path / "cmp" / "programs" / f"{row.optimizer}.json")
        assert changed_prompts(make_program("mem0"), program) == row.changed_predictors
    assert any(row.changed_predictors for row in summary.rows)  # and at least one of them changed something
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_keeps_the_finished_rows_when_stopped_between_optimizers(tmp_path, fake_models):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("bootstrap", "blame_response"), budget=20,
                             attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))

    def stop(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compare_optimizers(request, models=models, on_row=stop)
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [row["optimizer"] for row in table["rows"]] == ["bootstrap"]
    assert "| bootstrap |" in (tmp_path / "cmp" / "compare.md").read_text()


def test_compare_resumes_with_the_finished_rows_and_memorizes_again_without_the_model(tmp_path):
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("bootstrap", "blame_response"), budget=20,
                             attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    models, engine = make_models()

    def stop(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # stopped after the first optimizer
        compare_optimizers(request, models=models, on_row=stop)
    first = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    assert [row["optimizer"] for row in first] == ["bootstrap"] and engine.calls

    # a new process: the warm-up and the baseline's answers come from the kept replies, no model call
    models, engine = make_models()
    summary = compare_optimizers(replace(request, optimizers=("bootstrap",), resume=True), models=models)
    assert not engine.calls
    assert [row.to_dict() for row in summary.rows] == first  # the finished row, as it was

    models, engine = make_models()
    ran: list[str] = []
    summary = compare_optimizers(replace(request, resume=True), models=models, on_row=lambda row: ran.append(row.optimizer))
    assert ran == ["blame_response"] and engine.calls  # only the optimizer with no row ran, live
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [row["optimizer"] for row in table["rows"]] == ["bootstrap", "blame_response"]
    assert table["rows"][0] == first[0] and table["rows"][1]["paired"]["n"] == summary.test_questions

    # a resume asking fewer optimizers keeps the other finished rows in the table, after the ones asked
    models, engine = make_models()
    compare_optimizers(replace(request, optimizers=("blame_response",), resume=True), models=models)
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [row["optimizer"] for row in table["rows"]] == ["blame_response", "bootstrap"] and not engine.calls

    # without resume the comparison starts again; another setting cannot resume from these rows
    with pytest.raises(ConfigError, match="budget differ"):
        compare_optimizers(replace(request, budget=30, resume=True), models=make_models()[0])
    # nor other splits: other conversations, or the same ones with other questions
    with pytest.raises(ConfigError, match="splits differ"):
        compare_optimizers(replace(request, train="toy-b", val="toy-a", resume=True), models=make_models()[0])
    with pytest.raises(ConfigError, match="splits differ"):
        compare_optimizers(replace(request, per_split=5, resume=True), models=make_models()[0])


def test_a_row_cut_mid_way_resumes_without_the_model_and_spends_the_budget_it_would_have(tmp_path, monkeypatch):
    import shutil
    import sqlite3

    from memtrace_opt.optimizers.comparison import compare

    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "whole", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("blame_response",), budget=40, attribution="lineage",
                             loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0), time_budget=3600)
    whole = compare_optimizers(request, models=make_models()[0]).rows[0]
    assert whole.lm_calls > 4 and whole.earlier_seconds == 0

    inside, ours = [False], compare._ours

    def marked(*args, **kwargs):
        inside[0] = True
        try:
            return ours(*args, **kwargs)
        finally:
            inside[0] = False

    monkeypatch.setattr(compare, "_ours", marked)
    row_calls = [0]

    def counted(stop_after: int | None):
        models, engine = make_models()
        live = engine.complete

        def complete(request_):
            if inside[0]:
                row_calls[0] += 1
                if stop_after is not None and row_calls[0] > stop_after:
                    raise KeyboardInterrupt  # the sitting ends here
            return live(request_)

        monkeypatch.setattr(engine, "complete", complete)
        return models

    with pytest.raises(KeyboardInterrupt):  # half-way through the row
        compare_optimizers(replace(request, out=tmp_path / "cut"), models=counted(whole.lm_calls // 2))
    shutil.copytree(tmp_path / "cut", tmp_path / "slow")
    row_calls[0] = 0
    models = counted(None)
    resumed = compare_optimizers(replace(request, out=tmp_path / "cut", resume=True), models=models).rows[0]
    assert resumed.lm_calls == whole.lm_calls  # the replies of the first sitting charged again, once each
    assert row_calls[0] == whole.lm_calls - whole.lm_calls // 2  # only the rest reached the model
    same = ("optimized_accuracy", "changed_predictors", "cached_calls", "tokens", "paired")
    assert [getattr(resumed, k) for k in same] == [getattr(whole, k) for k in same]
    assert 0 < resumed.earlier_seconds <= resumed.seconds  # the first sitting's model time is in the row's time
    table = (tmp_path / "cut" / "compare.md").read_text()
    assert "Run over more than one sitting: blame_response (" in table
    assert "more than one sitting" not in (tmp_path / "whole" / "compare.md").read_text()

    # the first sitting's time counts against the row's time limit too: had it spent the hour, none is left
    with sqlite3.connect(tmp_path / "slow" / "replies" / "blame_response.sqlite") as db:
        db.execute("UPDATE replies SET reply = json_set(reply, '$.seconds', 4000.0)")
    slow = compare_optimizers(replace(request, out=tmp_path / "slow", resume=True), models=make_models()[0]).rows[0]
    assert slow.stopped_by == "time" and slow.earlier_seconds >= 4000 and slow.lm_calls <= whole.lm_calls // 2


def test_compare_runs_the_ablations_of_our_loop_as_rows(tmp_path, fake_models):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("memtrace_roundrobin", "memtrace_all", "memtrace_norepair",
                                                       "memtrace_nolocal"),
                             budget=40, attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, rounds=3,
                                                                                    patience=3, settings=False))
    rows = {row.optimizer: row for row in compare_optimizers(request, models=models).rows}
    assert all(row.error is None and row.optimized_accuracy is not None for row in rows.values())
    order = [name for name, _ in make_program("mem0").named_predictors()]
    chosen = [r["chosen_predictor"] for r in rows["memtrace_roundrobin"].details["rounds"]]
    assert chosen and chosen == order[: len(chosen)]  # the predictors in program order, whatever was blamed
    first = rows["memtrace_all"].details["rounds"][0]
    assert set(first["blame_counts"]) == set(order)  # every failure went to every prompt
    assert len(set(first["blame_counts"].values())) == 1
    assert all(not r.get("repairs", {}).get("tried") for r in rows["memtrace_norepair"].details.get("rounds", []))
    nolocal = rows["memtrace_nolocal"].details  # the local check and the minibatch ranked: no local set
    tried = [*nolocal.get("rounds", []), *([nolocal["interrupted"]] if nolocal.get("interrupted") else [])]
    assert tried and all("local_set" not in r for r in tried)
    assert any(c.get("minibatch_score") is not None for r in tried for c in r["candidates"])
    for name in rows:
        assert (tmp_path / "cmp" / "programs" / f"{name}.json").is_file()


def test_compare_rows_spend_live_calls_even_where_dspys_cache_holds_their_replies(tmp_path, monkeypatch):
    """DSPy's own cache keys a request without its server or engine: no row is served from it. What a row is served
    from is the warm-up's snapshot, which each comparison makes anew."""
    import dspy
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("bootstrap",), budget=20, attribution="lineage",
                             loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    models, engine = make_models()
    for role in ("task", "reflection", "attributor"):  # as the embedded model is: DSPy's cache on
        models.get(role).cache = True
    (first,) = compare_optimizers(request, models=models).rows
    engine.reset()
    (again,) = compare_optimizers(replace(request, out=tmp_path / "again"), models=models).rows
    assert (again.lm_calls, again.cached_calls) == (first.lm_calls, first.cached_calls)  # the same work, the same way
    assert engine.calls  # the second comparison's warm-up asked the model again: DSPy's cache served it nothing
    assert all(models.get(role).cache for role in ("task", "reflection", "attributor"))  # restored after


def test_compare_time_budget_stops_each_optimizer_on_the_clock(tmp_path, fake_models):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("bootstrap", "memtrace"), budget=1000, time_budget=0.0,
                             attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    bootstrap, ours = compare_optimizers(request, models=models).rows
    assert bootstrap.stopped_by_budget and bootstrap.lm_calls == 0 and bootstrap.error is None
    assert ours.stopped_by_budget and not ours.details["rounds"]  # the baseline ran; no round had time left
    assert bootstrap.stopped_by == ours.stopped_by == "time"  # the clock, not the 1000 calls
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert table["time_budget"] == 0.0 and [row["stopped_by"] for row in table["rows"]] == ["time", "time"]
    rows = [line for line in (tmp_path / "cmp" / "compare.md").read_text().splitlines() if line.startswith("| b")]
    assert rows[0].split(" | ")[-3] == "time"  # stop, then rounds and changed


def test_compare_tells_a_stop_on_the_call_budget_from_one_on_the_clock(tmp_path, fake_models):
    models, _ = fake_models
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("memtrace",), budget=3, attribution="lineage",
                             loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    (ours,) = compare_optimizers(request, models=models).rows
    # its baseline is the warm-up's (served, no call), and no round fits in 3 calls: stopped on the call budget
    assert ours.stopped_by_budget and ours.stopped_by == "calls" and ours.lm_calls <= 3 and not ours.details["rounds"]
    # a loop that stops with calls left, too few to validate a candidate, stopped on the call budget too
    (kept,) = compare_optimizers(replace(request, budget=10, out=tmp_path / "cmp10"), models=models).rows
    assert kept.stopped_by_budget and kept.stopped_by == "calls" and kept.lm_calls < 10 and not kept.details["rounds"]


def test_cli_compare_prints_each_row_question_by_question(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    main(["compare", "--system", "mem0", "--lm", "fake", "--data", str(data), "--train", "toy-a", "--val", "toy-b",
          "--test", "toy-c", "--optimizers", "bootstrap", "--budget", "10", "--patience", "3", "--min-val-gain", "0.05",
          "--min-val-questions", "3", "--demo-pool", "5", "--demo-budget", "9000", "--full-demos", "--no-validate-ties", "--out", "cmp"])
    printed = capsys.readouterr().out
    written = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert written["loop"]["patience"] == 3 and written["loop"]["min_val_gain"] == 0.05  # the loop's flags reached it
    assert written["loop"]["min_val_questions"] == 3 and written["loop"]["demo_pool"] == 5
    assert written["loop"]["demo_budget"] == 9000 and written["loop"]["compact_demos"] is False
    assert written["loop"]["validate_ties"] is False and written["loop"]["rounds"] == 6  # and the rest default
    row = written["rows"][0]
    fixed, broken = len(row["paired"]["fixed"]), len(row["paired"]["broken"])
    assert f"bootstrap: {row['baseline_accuracy']:.3f} -> {row['optimized_accuracy']:.3f} (questions +{fixed} / -{broken}" \
        in " ".join(printed.split())
    assert (tmp_path / "cmp" / "programs" / "bootstrap.json").is_file()


def test_cli_compare_resume_keeps_the_rows_it_finished(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    args = ["compare", "--system", "mem0", "--lm", "fake", "--data", str(data), "--train", "toy-a", "--val", "toy-b",
            "--test", "toy-c", "--budget", "10", "--out", "cmp"]
    main([*args, "--optimizers", "bootstrap"])
    first = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    capsys.readouterr()
    main([*args, "--optimizers", "bootstrap,blame_response", "--resume"])
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "cmp" / "compare.json").read_text())["rows"]
    assert rows[0] == first[0] and [r["optimizer"] for r in rows] == ["bootstrap", "blame_response"]
    assert "blame_response: " in printed and "bootstrap: " not in printed  # only the new row ran
