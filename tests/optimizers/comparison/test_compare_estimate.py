"""compare.json keeps the estimate `memtrace compare` says at the start beside what the comparison took: the whole
run's `estimate` and `seconds`, and each row's `estimated_seconds` beside its `seconds`. An older compare.json,
written without them, still resumes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from optfixtures import make_models
from toydata import write_locomo

from memtrace_opt.optimizers import LoopSettings
from memtrace_opt.optimizers.comparison.compare import CompareRequest, compare_optimizers


def request_for(tmp_path) -> CompareRequest:
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    return CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                          test="toy-c", optimizers=("bootstrap", "blame_response"), budget=20, attribution="lineage",
                          loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))


def read_table(tmp_path) -> dict:
    return json.loads((tmp_path / "cmp" / "compare.json").read_text())


def test_compare_json_records_the_estimate_beside_the_seconds(tmp_path):
    compare_optimizers(request_for(tmp_path), models=make_models()[0], estimate=True)
    table = read_table(tmp_path)
    estimate = table["estimate"]  # as said at the start, by part
    assert estimate["lm_calls"] > 0 and estimate["rates"]["source"] == "known"  # the fake LM's set speed
    assert set(estimate["parts"]) == {"warm-up", "bootstrap", "blame_response"}
    assert table["seconds"] >= max(row["seconds"] for row in table["rows"])  # the whole run's wall time
    for row in table["rows"]:
        assert row["estimated_seconds"] == estimate["parts"][row["optimizer"]] >= 0


def test_without_an_estimate_the_fields_say_none(tmp_path):
    compare_optimizers(request_for(tmp_path), models=make_models()[0], estimate=False)
    table = read_table(tmp_path)
    assert table["estimate"] is None and table["seconds"] > 0
    assert [row["estimated_seconds"] for row in table["rows"]] == [None, None]


def test_a_compare_json_written_without_the_estimate_resumes(tmp_path):
    request = request_for(tmp_path)

    def stop(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # stopped after the first optimizer
        compare_optimizers(request, models=make_models()[0], on_row=stop, estimate=True)
    path = tmp_path / "cmp" / "compare.json"
    old = read_table(tmp_path)  # as an earlier release wrote it: no estimate, no seconds, rows without theirs
    del old["estimate"], old["seconds"]
    for row in old["rows"]:
        del row["estimated_seconds"]
    path.write_text(json.dumps(old), encoding="utf-8")

    ran: list[str] = []
    compare_optimizers(replace(request, resume=True), models=make_models()[0], estimate=True,
                       on_row=lambda row: ran.append(row.optimizer))
    table = read_table(tmp_path)
    assert ran == ["blame_response"]  # the old row was kept
    kept, new = table["rows"]
    assert kept["optimizer"] == "bootstrap" and kept["estimated_seconds"] is None
    assert {k: v for k, v in kept.items() if k != "estimated_seconds"} == old["rows"][0]
    assert set(table["estimate"]["parts"]) == {"warm-up", "blame_response"}  # this run's estimate: what it ran
    assert new["estimated_seconds"] == table["estimate"]["parts"]["blame_response"]
