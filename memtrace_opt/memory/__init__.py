"""Memory state: versioned units, their search index, and the operations that change or read them."""

from memtrace_opt.memory.index import Hit, SearchIndex, rrf_fuse, tokenize
from memtrace_opt.memory.ops import ACTIVE_REPLAY, LMOperation, Operation, OperationFailed, ReplayControl
from memtrace_opt.memory.roles import OpRole, role_for_name
from memtrace_opt.memory.store import MemoryStore, MemoryUnit, StoreEvent, StoreObserver, UnknownUnit

__all__ = [
    "ACTIVE_REPLAY",
    "Hit",
    "LMOperation",
    "MemoryStore",
    "MemoryUnit",
    "Operation",
    "OperationFailed",
    "OpRole",
    "ReplayControl",
    "SearchIndex",
    "StoreEvent",
    "StoreObserver",
    "UnknownUnit",
    "role_for_name",
    "rrf_fuse",
    "tokenize",
]
