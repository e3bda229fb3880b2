"""Optimizers of memory programs: the attribution-guided closed loop (`MemTraceOptimizer`), the adapters
that run DSPy's own optimizers on the same program, metric, data and LM-call budget, and the comparison.

    from memtrace_opt.optimizers import MemTraceOptimizer, LoopSettings, make_examples
    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(budget=300))
    optimized = optimizer.compile(program, trainset=make_examples(train), valset=make_examples(val))

The tree, by role:
    loop/        the teleprompter, one round's pipeline, the stop policy, the settings tree, records, the study
    sources/     the candidate sources (reflective rewrites, pattern rules, demos, the combination)
    gates/       the gates a candidate passes (local check, minibatch, validation) and their `Decision`
    evaluation/  the substrate: cached traced evaluation, metric, memo, examples, splits, blame, evidence
    comparison/  DSPy's optimizers on the same budget, the paired statistics, the comparison's tables
    optimize.py  `memtrace optimize`: a run directory from a request
"""

from memtrace_opt.optimizers.comparison.baselines import BASELINES, BaselineRun, run_baseline
from memtrace_opt.optimizers.comparison.compare import (
    CompareRequest,
    CompareRow,
    CompareSummary,
    compare_optimizers,
)
from memtrace_opt.optimizers.comparison.gepa_selector import AttributedComponentSelector
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.examples import (
    CaseRef,
    case_refs,
    make_examples,
    register_conversation,
)
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric, CaseScore, dspy_metric
from memtrace_opt.optimizers.evaluation.program_io import (
    instructions_of,
    load_optimized,
    save_program,
    with_instruction,
)
from memtrace_opt.optimizers.evaluation.qa import MemoryQA, QAContext
from memtrace_opt.optimizers.evaluation.splits import Splits, make_splits
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule, AcceptanceSettings, StrictImprovement
from memtrace_opt.optimizers.gates.decision import Decision, Status
from memtrace_opt.optimizers.loop.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.loop.plan import RoundPlan
from memtrace_opt.optimizers.loop.records import CandidateRecord, OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.optimizers.loop.stop import StopPolicy, StopReason
from memtrace_opt.optimizers.loop.study import StudyLedger, default_storage
from memtrace_opt.optimizers.loop.teleprompter import MemTraceOptimizer
from memtrace_opt.optimizers.optimize import PRESETS, OptimizeRequest, OptimizeSummary, optimize_system
from memtrace_opt.optimizers.sources.base import Candidate, CandidateSource, ProposalSettings, SourceRequest
from memtrace_opt.optimizers.sources.demo_source import DemoSettings, DemosSource
from memtrace_opt.optimizers.sources.patterns import PatternSource
from memtrace_opt.optimizers.sources.reflective import (
    InstructionProposer,
    OpEvidence,
    ProposalEvidence,
    ReflectiveProposer,
    ReflectiveSource,
)

__all__ = [
    "AcceptanceRule",
    "AcceptanceSettings",
    "AnswerMetric",
    "AttributedComponentSelector",
    "BaselineRun",
    "BASELINES",
    "BudgetExhausted",
    "CachedEvaluator",
    "Candidate",
    "CandidateRecord",
    "CandidateSource",
    "case_refs",
    "CaseRef",
    "CaseResult",
    "CaseScore",
    "compare_optimizers",
    "CompareRequest",
    "CompareRow",
    "CompareSummary",
    "Decision",
    "default_storage",
    "DemoSettings",
    "DemosSource",
    "dspy_metric",
    "EvalResult",
    "guard_lm",
    "InstructionProposer",
    "instructions_of",
    "LMBudget",
    "load_optimized",
    "LoopSettings",
    "make_examples",
    "make_splits",
    "MemoryQA",
    "MemTraceOptimizer",
    "ModuleSelector",
    "MostBlamed",
    "OpEvidence",
    "OptimizationResult",
    "optimize_system",
    "OptimizeRequest",
    "OptimizeSummary",
    "PatternSource",
    "PRESETS",
    "ProposalEvidence",
    "ProposalSettings",
    "QAContext",
    "ReflectiveProposer",
    "ReflectiveSource",
    "register_conversation",
    "ReplayMemo",
    "RoundPlan",
    "RoundRecord",
    "run_baseline",
    "save_program",
    "SourceRequest",
    "Splits",
    "Status",
    "StopPolicy",
    "StopReason",
    "StrictImprovement",
    "StudyLedger",
    "with_instruction",
]
