"""Root-cause attribution of failed questions over memory evolution graphs.

    from memtrace_opt.attribution import attribute_cases, FailedCase
    verdicts = attribute_cases(cases, "graphtrace", lm=attributor_lm)

Methods (by name): `lineage` (rules, no LM), `graphtrace` (structure first, then small local LM questions),
`counterfactual` (graphtrace candidates confirmed by replay), and the baselines `all_at_once`,
`step_by_step`, `binary_search`, `random`, `blame_response`.

Code outside this package imports from here, never from its `_private` modules: besides the methods, the
public API holds the graph view and its value helpers (`GraphView`, `value_text`, `value_parts`), the
information flow of a failed question (`Flow`, `NeededInfo`, `Provenance`: the parts of a value that descend from its
evidence turns) and the store-action helpers (`action_field`,
`action_unit`) that the optimizer's evidence and the benchmark's fault injection share.
"""

from memtrace_opt.attribution._evidence import Evidence, NeededInfo, find_evidence, split_evidence_ids
from memtrace_opt.attribution._flow import Flow
from memtrace_opt.attribution._gold import AnswerJudge, LMAnswerJudge
from memtrace_opt.attribution._graph import (
    GraphUnavailable,
    GraphView,
    load_case_graph,
    value_parts,
    value_text,
)
from memtrace_opt.attribution._provenance import Provenance
from memtrace_opt.attribution._types import (
    DELETION,
    ERROR_TYPES,
    EXTRACTION,
    GOLD,
    RESPONSE,
    RETRIEVAL,
    ROLE_MEANINGS,
    UPDATE,
    Cost,
    FailedCase,
    Replay,
    RoleMeaning,
    Verdict,
    action_field,
    action_unit,
    error_type_for_op,
    error_type_for_role,
)
from memtrace_opt.attribution.counterfactual import ReplayContext, ReplayProvider
from memtrace_opt.attribution.protocol import (
    AttributionConfig,
    Attributor,
    attribute_case,
    attribute_cases,
    get_attributor,
    make_verdict,
    method_names,
    register_method,
)
from memtrace_opt.attribution.runs import (
    AttributeRunResult,
    attribute_run,
    failed_cases,
    read_verdicts,
    summary_tables,
)

__all__ = [
    "AnswerJudge",
    "AttributeRunResult",
    "AttributionConfig",
    "Attributor",
    "Cost",
    "DELETION",
    "ERROR_TYPES",
    "EXTRACTION",
    "Evidence",
    "FailedCase",
    "Flow",
    "GOLD",
    "GraphUnavailable",
    "GraphView",
    "LMAnswerJudge",
    "NeededInfo",
    "Provenance",
    "RESPONSE",
    "ReplayContext",
    "Replay",
    "ReplayProvider",
    "RETRIEVAL",
    "ROLE_MEANINGS",
    "RoleMeaning",
    "UPDATE",
    "Verdict",
    "action_field",
    "action_unit",
    "attribute_case",
    "attribute_cases",
    "attribute_run",
    "error_type_for_op",
    "error_type_for_role",
    "failed_cases",
    "find_evidence",
    "split_evidence_ids",
    "get_attributor",
    "load_case_graph",
    "make_verdict",
    "method_names",
    "read_verdicts",
    "register_method",
    "summary_tables",
    "value_parts",
    "value_text",
]
