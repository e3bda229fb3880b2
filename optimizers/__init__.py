"""Optimizers of memory programs: the attribution-guided closed loop (`MemTraceOptimizer`), the adapters
that run DSPy's own optimizers on the same program, metric, data and LM-call budget, and the comparison.

    from memtrace_opt.optimizers import MemTraceOptimizer, LoopSettings, make_examples
    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings(max_lm_calls=300))
    optimized = optimizer.compile(program, trainset=make_examples(train), valset=make_examples(val))
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
from memtrace_opt.optimizers.gates.acceptance import AcceptanceRule, Decision, StrictImprovement
from memtrace_opt.optimizers.loop.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.loop.records import CandidateRecord, OptimizationResult, RoundRecord
from memtrace_opt.optimizers.loop.selection import ModuleSelector, MostBlamed
from memtrace_opt.optimizers.loop.study import StudyLedger, default_storage
from memtrace_opt.optimizers.loop.teleprompter import LoopSettings, MemTraceOptimizer
from memtrace_opt.optimizers.optimize import PRESETS, OptimizeRequest, OptimizeSummary, optimize_system
from memtrace_opt.optimizers.sources.reflective import (
    InstructionProposer,
    OpEvidence,
    ProposalEvidence,
    ReflectiveProposer,
)

__all__ = [
    "AcceptanceRule",
    "AnswerMetric",
    "AttributedComponentSelector",
    "BASELINES",
    "BaselineRun",
    "BudgetExhausted",
    "CachedEvaluator",
    "CandidateRecord",
    "CaseRef",
    "CaseResult",
    "CaseScore",
    "CompareRequest",
    "CompareRow",
    "CompareSummary",
    "Decision",
    "EvalResult",
    "InstructionProposer",
    "LMBudget",
    "LoopSettings",
    "MemTraceOptimizer",
    "MemoryQA",
    "ModuleSelector",
    "MostBlamed",
    "OpEvidence",
    "OptimizationResult",
    "OptimizeRequest",
    "OptimizeSummary",
    "PRESETS",
    "ProposalEvidence",
    "QAContext",
    "ReflectiveProposer",
    "ReplayMemo",
    "RoundRecord",
    "StrictImprovement",
    "Splits",
    "StudyLedger",
    "case_refs",
    "compare_optimizers",
    "default_storage",
    "dspy_metric",
    "guard_lm",
    "instructions_of",
    "load_optimized",
    "make_examples",
    "make_splits",
    "optimize_system",
    "register_conversation",
    "run_baseline",
    "save_program",
    "with_instruction",
]
