"""The lineage method on hand-built graphs whose root cause is known, one per error type per system shape."""

from __future__ import annotations

import pytest
from attr_graphs import ALL_CASES, EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, get_attributor

CONFIG = AttributionConfig(embedder="hash")


def case_for(graph, evidence=EVIDENCE, system="test") -> FailedCase:
    question = {"question_id": QID, "question": QUESTION, "answer": GOLD}
    return FailedCase(QID, question, GOLD, "Max", tuple(evidence), system, "s1", graph=graph)


@pytest.mark.parametrize(("system", "fault"), ALL_CASES)
def test_lineage_finds_the_known_root_cause(system: str, fault: str) -> None:
    built = build(system, fault)
    verdict = get_attributor("lineage", CONFIG).attribute(case_for(built.graph, system=system), built.graph)
    assert verdict.error is None
    assert (verdict.op_id, verdict.error_type) == (built.op_id, built.error_type), verdict.reason
    assert verdict.op == built.graph.nodes[built.op_id]["op"]
    assert verdict.method == "lineage" and verdict.case_id == QID


@pytest.mark.parametrize(("system", "fault"), [("mem0", "deletion"), ("rag", "retrieval"), ("evermemos", "extraction")])
def test_lineage_uses_pseudo_evidence_without_gold_ids(system: str, fault: str) -> None:
    built = build(system, fault)
    verdict = get_attributor("lineage", CONFIG).attribute(case_for(built.graph, evidence=()), built.graph)
    assert (verdict.op_id, verdict.error_type) == (built.op_id, built.error_type)
    assert "pseudo" in verdict.reason
    assert verdict.confidence < 0.6


def test_lineage_returns_an_error_verdict_when_the_question_was_never_answered() -> None:
    built = build("rag", "response")
    case = FailedCase("other", {"question_id": "nope", "question": QUESTION}, GOLD, "Max", EVIDENCE, graph=built.graph)
    verdict = get_attributor("lineage", CONFIG).attribute(case, built.graph)
    assert verdict.error is not None and "no answer op" in verdict.error
    assert verdict.op_id is None and verdict.error_type is None
