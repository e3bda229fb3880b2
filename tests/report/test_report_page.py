"""report.html: one self-contained file, its data safely embedded, the payload the page draws."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.errors import MemtraceError
from memtrace_opt.report import build_payload, embed_json, load_run, write_report
from memtrace_opt.report._payload import clip, intern_strings
from memtrace_opt.report.demo_run import DECIDE_INSTRUCTION_V2


def _embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert match
    return json.loads(match.group(1))


def test_embedded_json_cannot_close_the_script_element() -> None:
    hostile = {"q": "</script><script>alert(1)</script>", "c": "<!-- x -->", "a": "a & b", "l": "\u2028"}
    text = embed_json(hostile)
    assert "</script" not in text.lower() and "<!--" not in text and "<" not in text and "&" not in text
    assert json.loads(text) == hostile
    assert json.loads(embed_json({"x": float("nan"), "y": [float("inf"), 1.5]})) == {"x": None, "y": [None, 1.5]}


def test_report_is_one_offline_file(demo_run: Path) -> None:
    result = write_report(demo_run)
    page = result.path.read_text(encoding="utf-8")
    assert result.path == demo_run / "report.html"
    assert not re.search(r"<script[^>]+src=|<link\b|@import|url\(\s*['\"]?https?:", page)
    assert not re.search(r"(src|href)\s*=\s*[\"']https?:", page)
    assert page.lower().count("</script>") == 2  # the data and the script, nothing else closes early
    data = _embedded(page)
    assert data["summary"]["system"] == "mem0"
    question = next(c for c in data["cases"] if c["qid"] == "demo-q7")["question"]
    assert question == "Would Odalys enjoy a <b>glassware</b> fair?"
    assert "<b>glassware" not in page  # only ever as an escaped JSON string


def test_payload_lists_failed_questions_with_verdicts_views_and_rounds(demo_run: Path) -> None:
    payload = build_payload(load_run(demo_run))
    cases = {c["qid"]: c for c in payload["cases"]}
    assert len(cases) == 6 and "demo-q1" not in cases  # the right answer is not a failure
    assert cases["demo-q3"]["etype"] == "DeletionError" and cases["demo-q3"]["op"] == "mem0.update_decision"
    assert cases["demo-q7"]["etype"] == "Unattributed" and cases["demo-q7"]["verdicts"][0]["error"]
    confirmed, unconfirmed, untested = (cases[q]["verdicts"][0] for q in ("demo-q3", "demo-q6", "demo-q2"))
    assert (confirmed["confirmed"], confirmed["replays"], confirmed["cost"]["replay_calls"]) == (True, 1, 6)
    assert (unconfirmed["confirmed"], unconfirmed["replays"]) == (False, 1)
    assert (untested["confirmed"], untested["replays"]) == (None, 0) and "replay_calls" not in untested["cost"]
    assert payload["error_types"]["DeletionError"] == 1 and payload["ops"]["mem0.update_decision"] == 2
    assert set(payload["views"]) == {c["id"] for c in payload["cases"]}
    described = payload["nodes"]["graphs/demo.json"]
    drawn = {n[0] for view in payload["views"].values() for n in view["nodes"]}
    assert set(described) == drawn  # only the nodes some view draws are described
    blamed = cases["demo-q3"]["op_id"]
    view = payload["views"][cases["demo-q3"]["id"]]
    assert any(n[0] == blamed and "b" in n[3] for n in view["nodes"])
    instruction = described[blamed]["instructions"]  # shared by every decision op: stored once
    assert payload["strings"][instruction["$s"]].startswith("You maintain a memory store.")
    assert described[blamed]["lm_calls"][0]["messages"][0]["role"] == "system"
    optimize = payload["optimize"]
    assert [r["round"] for r in optimize["rounds"]] == [1, 2]
    assert len(optimize["diffs"]) == 1 and optimize["diffs"][0]["predictor"] == "update_decision.predict"
    assert "<ins" in optimize["diffs"][0]["html"] and "DELETE only when" in DECIDE_INSTRUCTION_V2
    assert optimize["plot"].startswith("<svg") and optimize["plot"].count('class="pt') == 3
    local, rejected, with_demos = optimize["rounds"][1]["candidates"]
    assert local["local"]["fixed"] == 2 and local["demos"] is None
    assert rejected["why"].startswith("rejected by the local check") and rejected["minibatch_score"] is None
    assert with_demos["demos"] == 1  # the page gets the count, not the worked examples


def test_the_round_cut_short_reaches_the_page_with_what_it_had_done_and_an_older_one_without(demo_run: Path) -> None:
    cut = build_payload(load_run(demo_run))["optimize"]["interrupted"]
    assert cut["phase"] == "validation" and cut["lm_calls"] == 38 and cut["repairs"]["confirmed"] == 1
    assert cut["local_set"]["targets"] == 4 and cut["not_fixable"] == {"mem0.retrieve": 1}
    manifest = json.loads((demo_run / "manifest.json").read_text())
    older = {k: manifest["optimizer"]["interrupted"][k] for k in ("round", "chosen_predictor", "blame_counts",
                                                                 "candidates", "why")}
    manifest["optimizer"]["interrupted"] = older  # as a run before the phase was kept wrote it
    (demo_run / "manifest.json").write_text(json.dumps(manifest))
    cut = build_payload(load_run(demo_run))["optimize"]["interrupted"]
    assert cut["round"] == 3 and "phase" not in cut and len(cut["candidates"]) == 2


def test_the_test_figure_keeps_its_label_and_an_older_manifest_reads_as_held_out(demo_run: Path) -> None:
    assert build_payload(load_run(demo_run))["optimize"]["test"] is None  # the demo records no test
    manifest = json.loads((demo_run / "manifest.json").read_text())
    figure = {"baseline_accuracy": 0.25, "optimized_accuracy": 0.5, "questions": 4}
    for label, shown in (("same-conversation questions", "same-conversation questions"), (None, "held-out test")):
        manifest["test"] = {**figure, **({"label": label} if label else {})}
        (demo_run / "manifest.json").write_text(json.dumps(manifest))
        test = build_payload(load_run(demo_run))["optimize"]["test"]
        assert test == {"label": shown, "baseline": 0.25, "optimized": 0.5, "questions": 4}


def test_summary_reads_both_accuracy_shapes(demo_run: Path) -> None:
    manifest = json.loads((demo_run / "manifest.json").read_text())
    manifest["accuracy"] = {"overall": {"count": 7, "mean_f1": 0.25, "rule_accuracy": 0.5, "judge_accuracy": None},
                            "rows": [{"category": "temporal", "count": 3, "mean_f1": 0.1, "rule_accuracy": 0.0}]}
    (demo_run / "manifest.json").write_text(json.dumps(manifest))
    accuracy = build_payload(load_run(demo_run))["summary"]["accuracy"]
    assert accuracy["overall"]["f1"] == 0.25 and accuracy["overall"]["accuracy"] == 0.5
    assert accuracy["overall"]["judge"] is None
    assert accuracy["by_category"]["temporal"]["count"] == 3


def test_a_bare_run_still_renders(tmp_path: Path) -> None:
    case = {"case_id": "c1", "sample_id": "s", "question_id": "q1", "question": "Q?", "gold": "A", "prediction": "B",
            "category": "single-hop", "scores": {"f1": 0.0}, "correct": False, "graph": "graphs/missing.json"}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    result = write_report(tmp_path, tmp_path / "out" / "r.html")
    data = _embedded(result.path.read_text())
    assert result.failed == 1 and result.views == 0
    assert data["cases"][0]["etype"] == "Unattributed" and data["cases"][0]["view"] is None
    assert data["summary"]["accuracy"]["overall"]["accuracy"] == 0.0 and data["optimize"] is None


def test_repeated_long_texts_are_stored_once() -> None:
    long = "an instruction " * 20
    nodes = {"g": {"op:1": {"instructions": long, "lm_calls": [{"messages": [{"content": long}]}]},
                   "op:2": {"instructions": long, "inputs": "short", "value": "x" * 300}}}
    table = intern_strings(nodes)
    assert table == [long]
    assert nodes["g"]["op:1"]["lm_calls"][0]["messages"][0]["content"] == {"$s": 0}
    assert nodes["g"]["op:2"]["instructions"] == {"$s": 0} and nodes["g"]["op:2"]["value"] == "x" * 300


def test_long_values_are_cut_with_a_note() -> None:
    text = clip("x" * 10_000, 100)
    assert text.startswith("x" * 100) and "9,900 more characters" in text
    assert clip({"a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ]\n}'


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(MemtraceError, match="not a run directory"):
        write_report(tmp_path)


def test_report_command(demo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "page.html"
    main(["report", str(demo_run), "--out", str(out), "--max-nodes", "40"])
    assert out.exists() and "6 failed questions" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(tmp_path / "nope")])
    assert exit_info.value.code == 2 and "error:" in capsys.readouterr().err
