"""MemTraceBench: labelled failures of memory systems (fault injection with replay, lineage labels, LoCoMo
answer-key fixes) and the scoring of attribution methods on them.

    summary = build_bench(BuildRequest(systems=("mem0", "rag"), out=Path("bench")), task_lm=lm)
    scores = eval_bench("bench", ["lineage", "graphtrace"], lm=attributor_lm)
"""

from memtrace_opt.benchmarks.memtracebench._types import (
    BENCH_SCHEMA_VERSION,
    SOURCES,
    BenchCase,
    Injection,
    Label,
)
from memtrace_opt.benchmarks.memtracebench.build import BuildRequest, BuildSummary, build_bench, load_pr28
from memtrace_opt.benchmarks.memtracebench.evaluate import (
    MethodScore,
    Score,
    confusion_table,
    eval_bench,
    load_bench,
    score_tables,
    score_verdicts,
)
from memtrace_opt.benchmarks.memtracebench.inject import INJECTABLE, Plan, plan_injections

__all__ = [
    "BENCH_SCHEMA_VERSION",
    "SOURCES",
    "INJECTABLE",
    "BenchCase",
    "BuildRequest",
    "BuildSummary",
    "Injection",
    "Label",
    "MethodScore",
    "Plan",
    "Score",
    "build_bench",
    "confusion_table",
    "eval_bench",
    "load_bench",
    "load_pr28",
    "plan_injections",
    "score_tables",
    "score_verdicts",
]
