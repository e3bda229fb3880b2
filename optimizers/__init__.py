"""Optimizers of memory programs: the attribution-guided closed loop (`MemTraceOptimizer`), the adapters
that run DSPy's own optimizers on the same program, metric, data and LM-call budget, and the comparison.

    from memtrace_opt.optimizers import MemTraceOptimizer, LoopSettings, make_examples
    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(budget=300))
    optimized = optimizer.compile(program, trainset=make_examples(train), valset=make_examples(val))

The tree, by role (each layer imports only the layers above it in this list; a test keeps it so):
    core/        plain values: the candidate prompt, a gate's decision, knobs, the LM-call budget, program.json
                 I/O, the evidence a proposer reads, a confirmed repair
    evaluation/  the substrate: cached traced evaluation, metric, memo, examples, splits, blame, evidence, repairs,
                 the local set
    sources/     the candidate sources (reflective rewrites, pattern rules, demos, the combination)
    gates/       the objectives a candidate is scored on (local, minibatch, validation) and the acceptance rule
    loop/        the teleprompter, one round's pipeline, the stop policy, the settings tree, records, the study
    comparison/  DSPy's optimizers on the same budget, the paired statistics, the comparison's tables
    optimize.py  `memtrace optimize`: a run directory from a request
    closing.py   its closing lines (what was blamed, tried, accepted and why), written from the manifest
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

# ruff: noqa: F401 - the imports below are the API's list, read by `_exports`
if TYPE_CHECKING:  # the public API, imported on first use (`__getattr__`): the CLI reads the settings tree
    # without loading the loop, the study or DSPy's optimizers
    from memtrace_opt.optimizers.comparison.baselines import BASELINES, BaselineRun, run_baseline
    from memtrace_opt.optimizers.comparison.compare import (
        CompareRequest,
        CompareRow,
        CompareSummary,
        compare_optimizers,
    )
    from memtrace_opt.optimizers.comparison.gepa_selector import AttributedComponentSelector
    from memtrace_opt.optimizers.core.budget import BudgetExhausted, LMBudget, guard_lm
    from memtrace_opt.optimizers.core.candidate import Candidate
    from memtrace_opt.optimizers.core.decision import Decision, Status
    from memtrace_opt.optimizers.core.evidence import OpEvidence, ProposalEvidence
    from memtrace_opt.optimizers.core.program_io import (
        instructions_of,
        load_optimized,
        save_program,
        with_instruction,
    )
    from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, CaseResult, EvalResult
    from memtrace_opt.optimizers.evaluation.examples import (
        CaseRef,
        case_refs,
        make_examples,
        register_conversation,
    )
    from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
    from memtrace_opt.optimizers.evaluation.metric import AnswerMetric, CaseScore, dspy_metric
    from memtrace_opt.optimizers.evaluation.qa import MemoryQA, QAContext
    from memtrace_opt.optimizers.evaluation.splits import Splits, make_splits
    from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule, AcceptanceSettings, StrictImprovement
    from memtrace_opt.optimizers.loop.records import (
        CandidateRecord,
        OptimizationResult,
        RoundPlan,
        RoundRecord,
    )
    from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed
    from memtrace_opt.optimizers.loop.settings import LoopSettings
    from memtrace_opt.optimizers.loop.stop import StopPolicy, StopReason
    from memtrace_opt.optimizers.loop.study import StudyLedger, default_storage
    from memtrace_opt.optimizers.loop.teleprompter import MemTraceOptimizer
    from memtrace_opt.optimizers.optimize import PRESETS, OptimizeRequest, OptimizeSummary, optimize_system
    from memtrace_opt.optimizers.sources.base import CandidateSource, ProposalSettings, SourceRequest
    from memtrace_opt.optimizers.sources.demo_source import DemoSettings, DemosSource
    from memtrace_opt.optimizers.sources.patterns import PatternSource
    from memtrace_opt.optimizers.sources.reflective import (
        InstructionProposer,
        ReflectiveProposer,
        ReflectiveSource,
    )


def _exports() -> dict[str, str]:
    """Name -> module of the imports in the block above, read from this file (the one list of the API)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    return {alias.name: str(stmt.module) for stmt in block.body if isinstance(stmt, ast.ImportFrom)
            for alias in stmt.names}


_EXPORTS = _exports()
__all__ = sorted(_EXPORTS, key=str.lower)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
