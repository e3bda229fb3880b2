"""Benchmark datasets: typed conversations and questions, loaders, the gold revision, slicing and resolution by name."""

from __future__ import annotations

from memtrace_opt.data._types import (
    ABSTAIN_ANSWER,
    CATEGORY_ORDER,
    DEFAULT_GOLD,
    GLUED_PAIRS,
    GLUED_WORDS,
    GOLD_CHOICES,
    QA_CORRECTIONS,
    Conversation,
    Dataset,
    DatasetStats,
    GoldRevision,
    Question,
    Session,
    Turn,
    category_sort_key,
    session_of,
)
from memtrace_opt.data.gold import (
    CORRECTIONS_FILE,
    ConversationWords,
    corrections_beside,
    revise_gold,
    split_glued_pairs,
    split_glued_words,
)
from memtrace_opt.data.loader import SAMPLE_PATH, load_dataset, load_sample
from memtrace_opt.data.locomo import LOCOMO_CATEGORIES, clean_evidence, load_locomo
from memtrace_opt.data.longmemeval import load_longmemeval
from memtrace_opt.data.resolve import (
    SOURCES,
    DatasetSource,
    fetch_dataset,
    load_data,
    resolve_data,
    user_data_dir,
)
from memtrace_opt.data.slicing import DataSlice, DataSpec, SessionRange, parse_data_spec, parse_sessions

__all__ = [
    "ABSTAIN_ANSWER",
    "CATEGORY_ORDER",
    "CORRECTIONS_FILE",
    "DEFAULT_GOLD",
    "GLUED_PAIRS",
    "GLUED_WORDS",
    "GOLD_CHOICES",
    "QA_CORRECTIONS",
    "LOCOMO_CATEGORIES",
    "SAMPLE_PATH",
    "SOURCES",
    "Conversation",
    "ConversationWords",
    "DataSlice",
    "DataSpec",
    "Dataset",
    "DatasetSource",
    "DatasetStats",
    "GoldRevision",
    "Question",
    "Session",
    "SessionRange",
    "Turn",
    "category_sort_key",
    "clean_evidence",
    "corrections_beside",
    "fetch_dataset",
    "load_data",
    "load_dataset",
    "load_locomo",
    "load_longmemeval",
    "load_sample",
    "parse_data_spec",
    "parse_sessions",
    "resolve_data",
    "revise_gold",
    "session_of",
    "split_glued_pairs",
    "split_glued_words",
    "user_data_dir",
]
