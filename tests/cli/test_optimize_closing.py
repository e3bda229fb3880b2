"""`memtrace optimize` ends with the closing lines (what it blamed, tried and accepted, and where in report.html to
look), and the anchor they name is on the page it wrote."""

from __future__ import annotations

import json
import re

from memtrace_opt.cli import main
from memtrace_opt.optimizers.closing import ROUNDS_ANCHOR


def test_the_quick_preset_ends_with_the_closing_lines_and_their_anchor_is_in_the_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(["optimize", "--system", "rag", "--lm", "fake", "--preset", "quick", "--out", "opt"])
    printed = capsys.readouterr().out.splitlines()
    manifest = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    rounds = manifest["rounds"]
    assert rounds and rounds[0]["chosen_predictor"]
    closing = printed[printed.index(next(line for line in printed if line.startswith("blamed: "))):]
    assert 4 <= len(closing) <= 8
    assert f"{rounds[0]['chosen_predictor']} " in closing[0]  # the blamed predictor, with its count
    first = next(line for line in closing if line.startswith("round 1, "))
    assert rounds[0]["chosen_predictor"] in first and "(local objective, net targets)" in first
    origins = {c.get("origin") or "demos" for c in rounds[0]["candidates"]}
    assert all(origin in first for origin in origins)
    taken = [c for c in rounds[0]["candidates"] if c["accepted"]]
    assert (taken[0]["why"] in first) if taken else ("nothing accepted (" in first)
    test = manifest["test"]
    label = "same-conversation questions"  # the sample is one conversation: its test is not held out
    assert f"{label} {test['baseline_accuracy']:.3f} -> {test['optimized_accuracy']:.3f}" in "\n".join(closing)
    # the preset's lineage needs no LM, so the held-out failures are blamed in the run (and in its verdicts.jsonl)
    failing = round(test["questions"] * (1 - test["optimized_accuracy"]))
    assert failing and sum(test["blame"]["ops"].values()) == failing and test["blame"]["method"] == "lineage"
    blamed_line = next(line for line in closing if line.startswith(label))
    assert all(f"{op} {n}" in blamed_line for op, n in test["blame"]["ops"].items())
    cases = [json.loads(line) for line in (tmp_path / "opt" / "cases.jsonl").read_text().splitlines()]
    verdicts = [json.loads(line) for line in (tmp_path / "opt" / "verdicts.jsonl").read_text().splitlines()]
    failed = {c["case_id"] for c in cases if not c["correct"]}
    assert failed <= {v["case_id"] for v in verdicts if v["method"] == "lineage"}
    look = closing[-1]
    match = re.match(r"see (\S+)#([\w-]+) ", look)
    assert match and match.group(2) == ROUNDS_ANCHOR
    page = (tmp_path / match.group(1)).read_text(encoding="utf-8")
    assert f'id="{match.group(2)}"' in page
    for anchor in re.findall(r"#([\w-]+)", look):  # every anchor the line names is on the page
        assert f'id="{anchor}"' in page
