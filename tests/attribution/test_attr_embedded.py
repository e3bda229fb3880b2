"""graphtrace's questions parse on the real embedded model (slow: one or two local LM calls)."""

from __future__ import annotations

import pytest
from attr_graphs import EVIDENCE, GOLD, QID, QUESTION, build

from memtrace_opt.attribution import AttributionConfig, FailedCase, attribute_cases


@pytest.mark.embedded
def test_graphtrace_on_the_embedded_model() -> None:
    from memtrace_opt.lm.roles import ModelSpec, build_lm

    lm = build_lm(ModelSpec(model="embedded", max_tokens=256), "attributor")
    built = build("rag", "retrieval")
    case = FailedCase(QID, {"question_id": QID, "question": QUESTION}, GOLD, "Max", EVIDENCE, "rag", "s1",
                      graph=built.graph)
    [verdict] = attribute_cases([case], "graphtrace", lm=lm, config=AttributionConfig(embedder="hash", max_lm_calls=2))
    assert verdict.error is None
    assert 1 <= verdict.cost.lm_calls <= 2  # a repeated run may be served from the LM cache (no tokens)
    assert verdict.op_id in {op for op in built.graph if op.startswith("op:")}
