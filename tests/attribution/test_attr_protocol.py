"""The verdict format, the error taxonomy, the registry and the runner's guarantees."""

from __future__ import annotations

import json

import pytest
from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import (
    ERROR_TYPES,
    AttributionConfig,
    Cost,
    FailedCase,
    Verdict,
    attribute_cases,
    error_type_for_op,
    get_attributor,
    method_names,
)
from memtrace_opt.errors import ConfigError

CONFIG = AttributionConfig(embedder="hash")
DESIGN_KEYS = {"case_id", "method", "error_type", "op_id", "op", "predictor", "reason", "confidence", "cost"}


def test_verdict_round_trips_in_the_design_format() -> None:
    verdict = Verdict("c1", "lineage", "UpdateError", "op:6", "mem0.update_decision", "update_decision.predict",
                      "overwrote it", 0.6, Cost(2, 300, 40, 1.23456))
    data = verdict.to_dict()
    assert set(data) == DESIGN_KEYS | {"error"}
    assert set(data["cost"]) == {"lm_calls", "prompt_tokens", "completion_tokens", "seconds"}
    assert Verdict.from_dict(json.loads(json.dumps(data))).to_dict() == data
    failed = Verdict.failed("c2", "graphtrace", "no graph")
    assert failed.error == "no graph" and failed.error_type is None and not failed.ok


def test_an_older_cost_without_the_replay_fields_reads_as_no_replay() -> None:
    line = {"case_id": "c1", "method": "graphtrace", "error_type": "ExtractionError", "op_id": "op:3", "op": "x",
            "predictor": None, "reason": "r", "confidence": 0.7, "error": None,
            "cost": {"lm_calls": 11, "prompt_tokens": 900, "completion_tokens": 80, "seconds": 2.5}}
    verdict = Verdict.from_dict(line)
    assert (verdict.cost.lm_calls, verdict.cost.replay_calls, verdict.cost.replay_tokens) == (11, 0, 0)
    assert verdict.to_dict() == line  # written back as it was read
    split = Cost(3, 700, 50, 2.5, replay_calls=8, replay_prompt_tokens=200, replay_completion_tokens=30)
    assert split.to_dict()["replay_calls"] == 8 and Cost.from_dict(split.to_dict()) == split
    assert (split.tokens, split.replay_tokens) == (750, 230)


@pytest.mark.parametrize(
    ("op", "outputs", "expected"),
    [
        ("mem0.extract_facts", None, "ExtractionError"),
        ("evermemos.detect_boundary", None, "ExtractionError"),
        ("evermemos.finalize_memcell", None, "ExtractionError"),
        ("rag.chunk", None, "ExtractionError"),
        ("rag.index_chunk", None, "ExtractionError"),
        ("long_context.ingest", None, "ExtractionError"),
        ("long_context.trim", None, "DeletionError"),
        ("mem0.update_decision", {"memory_actions": [{"event": "UPDATE"}]}, "UpdateError"),
        ("mem0.update_decision", {"memory_actions": [{"event": "DELETE"}, {"event": "ADD"}]}, "DeletionError"),
        ("mem0.apply", None, "UpdateError"),
        ("mem0.search_similar", None, "UpdateError"),  # a write-path lookup: what a new fact updates
        ("evermemos.check_sufficiency", None, "RetrievalError"),
        ("evermemos.generate_queries", None, "RetrievalError"),
        ("evermemos.merge", None, "RetrievalError"),
        ("rag.retrieve", None, "RetrievalError"),
        ("rag.answer", None, "ResponseError"),
        ("custom.mystery", None, None),
    ],
)
def test_error_type_of_each_operation(op, outputs, expected) -> None:
    assert error_type_for_op(op, outputs) == expected
    assert expected is None or expected in ERROR_TYPES


def test_every_method_is_registered_and_unknown_names_are_config_errors() -> None:
    names = set(method_names())
    assert {"lineage", "graphtrace", "counterfactual", "all_at_once", "step_by_step", "binary_search", "random",
            "blame_response"} <= names
    with pytest.raises(ConfigError, match="unknown attribution method"):
        get_attributor("oracle")


def _case(case_id: str, graph=None, graph_path=None) -> FailedCase:
    question = {"question_id": QID, "question": QUESTION}
    return FailedCase(case_id, question, GOLD, "Max", EVIDENCE, "rag", "s1", graph_path=graph_path, graph=graph)


def test_a_broken_case_never_stops_the_others(tmp_path) -> None:
    good = build("rag", "retrieval")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    cases = [_case("missing", graph_path=tmp_path / "nope.json"), _case("broken", graph_path=broken),
             _case("good", graph=good.graph), _case("no-graph")]
    seen = []
    verdicts = attribute_cases(cases, "lineage", config=CONFIG, progress=lambda done, total, v: seen.append(done))
    assert [v.case_id for v in verdicts] == ["missing", "broken", "good", "no-graph"]
    assert "no such graph file" in verdicts[0].error
    assert "not a readable evolution graph" in verdicts[1].error
    assert verdicts[2].error is None and verdicts[2].op_id == good.op_id
    assert verdicts[3].error is not None
    assert sorted(seen) == [1, 2, 3, 4]
    assert all(v.cost.seconds >= 0 for v in verdicts)


def test_an_attributor_that_raises_becomes_an_error_verdict() -> None:
    class Exploding:
        name = "exploding"

        def attribute(self, case, graph):
            raise RuntimeError("boom")

    [verdict] = attribute_cases([_case("x", graph=build("rag", "response").graph)], Exploding())
    assert verdict.error == "RuntimeError: boom" and verdict.method == "exploding"


def test_threads_give_the_same_verdicts_in_input_order() -> None:
    cases = [_case(f"c{i}", graph=build(*pair).graph) for i, pair in
             enumerate([("rag", "retrieval"), ("mem0", "update"), ("long_context", "deletion"), ("evermemos", "merge")])]
    one = attribute_cases(cases, "lineage", config=CONFIG)
    many = attribute_cases(cases, "lineage", config=CONFIG, num_threads=3)
    assert [(v.case_id, v.op_id, v.error_type) for v in one] == [(v.case_id, v.op_id, v.error_type) for v in many]


def test_a_declared_role_decides_over_the_name() -> None:
    assert error_type_for_op("notes.consolidate", None, role="forms") == "ExtractionError"
    assert error_type_for_op("notes.summarize") == "ExtractionError"  # guessed from the name
    assert error_type_for_op("notes.forget", {"actions": []}) == "DeletionError"
    assert error_type_for_op("notes.step", None, role="none") is None
