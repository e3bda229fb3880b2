"""The local-set ceiling script: each predictor's local set, and every source scored on the calls it was not made
from, in a dry run with the fake LM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "optimizers"))

from toydata import write_locomo  # noqa: E402

from memtrace_opt.benchmarks.bench_local import main  # noqa: E402


def test_dry_run_scores_each_source_on_held_out_calls(tmp_path, capsys):
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b"))
    out = tmp_path / "out"
    assert main(["--data", str(data), "--train", "toy-a,toy-b", "--sessions", "1-2", "--categories", "", "--lm", "fake",
                 "--predictors", "extract_facts", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| extract_facts")]
    sources = {row.split(" | ")[1] for row in rows}
    assert {"seed", "reflection"} <= sources
    results = json.loads((out / "results.json").read_text())
    local = results["local_sets"]["extract_facts.predict"]
    assert local["calls"] >= 2 and local["targets"] >= local["seed_carried"]
    seed = next(r for r in results["rows"] if r["source"] == "seed")
    # half the calls are the candidates' own: every row is scored on the other half, the seed against itself
    assert seed["own_calls"] >= 1 and seed["calls"] + seed["own_calls"] == local["calls"]
    assert seed["fixed"] == seed["lost"] == 0


def test_a_conversation_not_in_the_data_is_one_line_and_exit_2(tmp_path, capsys):
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a",))
    assert main(["--data", str(data), "--train", "nope", "--lm", "fake"]) == 2
    assert "no conversation nope" in capsys.readouterr().err
