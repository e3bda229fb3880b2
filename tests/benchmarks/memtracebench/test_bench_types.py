"""A bench case and a run's case line are one schema where they meet: the fields they share are read and written
alike (`memtrace_opt.rundir.CASE_FIELDS`)."""

from __future__ import annotations

import json

from memtrace_opt.benchmarks.memtracebench import BenchCase
from memtrace_opt.rundir import CASE_FIELDS, CaseRecord

LINE = {"case_id": "rag:t-1:q2", "system": None, "dataset": "invented", "sample_id": "t-1", "question_id": "t-1:q2",
        "question": "Where did Nadia store the kayak?", "gold": 7, "prediction": "the shed", "evidence": ["D2:4"],
        "abstention": True}


def test_a_run_case_and_a_bench_case_read_the_fields_they_share_alike():
    run = CaseRecord.from_dict({**LINE, "scores": {}, "correct": False, "graph": "graphs/t-1.json"})
    bench = BenchCase.from_dict({**LINE, "graph": "graphs/t-1.json",
                                 "label": {"error_type": "RetrievalError", "op_id": "op:3", "op": "rag.retrieve",
                                           "source": "human"}})
    shared = {name: (getattr(run, name), getattr(bench, name)) for name in CASE_FIELDS}
    assert all(list(a) == list(b) if name == "evidence" else a == b for name, (a, b) in shared.items()), shared
    assert (run.system, run.gold, run.category) == ("", "7", "")  # null and missing read as empty, numbers as text
    written = [case.to_dict() for case in (run, bench)]
    assert [{name: line[name] for name in CASE_FIELDS} for line in written] == [{**LINE, "system": "", "gold": "7",
                                                                               "category": ""}] * 2
    for case, line in zip((run, bench), written, strict=True):
        assert type(case).from_dict(json.loads(json.dumps(line))).to_dict() == line  # round trip
