"""Optimizers of memory programs: the attribution-guided closed loop (`MemTraceOptimizer`), the adapters
that run DSPy's own optimizers on the same program, metric, data and LM-call budget, and the comparison.

    from memtrace_opt.optimizers import MemTraceOptimizer, LoopSettings, make_examples
    optimizer = MemTraceOptimizer.from_models(models, settings=LoopSettings(max_lm_calls=300))
    optimized = optimizer.compile(program, trainset=make_examples(train), valset=make_examples(val))
"""

from memtrace_opt.optimizers.acceptance import AcceptanceRule, Decision, StrictImprovement
from memtrace_opt.optimizers.baselines import BASELINES, BaselineRun, run_baseline
from memtrace_opt.optimizers.budget import BudgetExhausted, LMBudget, guard_lm
from memtrace_opt.optimizers.compare import CompareRequest, CompareRow, CompareSummary, compare_optimizers
from memtrace_opt.optimizers.evaluation import CachedEvaluator, CaseResult, EvalResult
from memtrace_opt.optimizers.examples import CaseRef, case_refs, make_examples, register_conversation
from memtrace_opt.optimizers.gepa_selector import AttributedComponentSelector
from memtrace_opt.optimizers.memo import ReplayMemo
from memtrace_opt.optimizers.metric import AnswerMetric, CaseScore, dspy_metric
from memtrace_opt.optimizers.optimize import PRESETS, OptimizeRequest, OptimizeSummary, optimize_system
from memtrace_opt.optimizers.program_io import instructions_of, load_optimized, save_program, with_instruction
from memtrace_opt.optimizers.proposal import (
    InstructionProposer,
    OpEvidence,
    ProposalEvidence,
    ReflectiveProposer,
)
from memtrace_opt.optimizers.qa import MemoryQA, QAContext
from memtrace_opt.optimizers.records import CandidateRecord, OptimizationResult, RoundRecord
from memtrace_opt.optimizers.selection import ModuleSelector, MostBlamed
from memtrace_opt.optimizers.splits import Splits, make_splits
from memtrace_opt.optimizers.study import StudyLedger, default_storage
from memtrace_opt.optimizers.teleprompter import LoopSettings, MemTraceOptimizer

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
