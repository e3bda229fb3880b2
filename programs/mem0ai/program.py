"""`mem0ai`: the real Mem0 library (`pip install 'memtrace-opt[mem0ai]'`) as a traced memory program.

Write path: each window of `window_turns` turns of a session goes through Mem0's `add()` (`mem0ai.add`); the LLM
calls Mem0 makes inside it are ops on the task LM (2.x: `mem0ai.extract`; 1.0.x: `mem0ai.extract_facts` then
`mem0ai.update_decision`), and each write Mem0 makes to its vector store is mirrored into the run's store under
Mem0's memory id (`mem0ai.store`, `mem0ai.update`, `mem0ai.delete`): a unit `mem:{mem0 id}@{version}`. Read path:
Mem0's `search()` for the question (`mem0ai.search`), then the same answer op as the other systems
(`mem0ai.answer`). Everything runs in process: Qdrant and the history database in memory, the run's embedder, the
task LM of the run; nothing is sent to Mem0's servers or written outside the run directory.

What an optimizer may rewrite is what Mem0 lets a user configure: 2.x's `custom_instructions`, 1.0.x's
`custom_fact_extraction_prompt` and `custom_update_memory_prompt`. `mem0_config()` is that part of a Mem0
configuration, for a user to merge into theirs (`memtrace optimize` writes it beside program.json).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.data import Conversation, Question, Session
from memtrace_opt.embed import get_embedder
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.index import SearchIndex
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryStore
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import PROMPT_OVERHEAD_TOKENS, chronological, fit_units
from memtrace_opt.programs.mem0ai._library import (
    TESTED,
    Pipeline,
    import_mem0,
    installed_version,
    offline_config,
    pipeline_of,
)
from memtrace_opt.programs.mem0ai.ops import (
    ADDITIVE_SEED,
    AdditiveExtract,
    ClassicExtractFacts,
    ClassicUpdateDecision,
    Mem0Add,
    Mem0Answer,
    Mem0Call,
    Mem0Search,
    Mem0Write,
)
from memtrace_opt.programs.tunable import tunable

__all__ = ["Mem0aiConfig", "Mem0aiMemory", "MEM0_CONFIG_FILE"]

log = logging.getLogger(__name__)

MEM0_CONFIG_FILE = "mem0_config.json"


@dataclass(frozen=True)
class Mem0aiConfig(ProgramConfig):
    """Windows of `window_turns` turns per `add()` (as our mem0 program's windows); `max_tokens` is Mem0's own
    default reply limit. The three prompt settings are Mem0's configuration keys of the same names: they seed the
    instructions of the LLM ops (unset: Mem0's own prompt)."""

    top_k: int = tunable(10, low=3, high=20, ops=("mem0ai.search", "mem0ai.answer"),
                         cost="more memories in every answer prompt")
    window_turns: int = tunable(6, low=1, high=8, ops=("mem0ai.extract", "mem0ai.extract_facts", "mem0ai.update_decision"),
                                cost="smaller windows: more add() calls, each one LLM call (two in 1.0.x)")
    max_tokens: int = 2000
    custom_instructions: str | None = None  # 2.x
    custom_fact_extraction_prompt: str | None = None  # 1.0.x
    custom_update_memory_prompt: str | None = None  # 1.0.x
    context_tokens: int = 8192 - 1024 - PROMPT_OVERHEAD_TOKENS

    def __post_init__(self) -> None:
        if self.window_turns < 1 or self.top_k < 1 or self.max_tokens < 16:
            raise ConfigError("mem0ai: window_turns and top_k must be at least 1, max_tokens at least 16")


class Mem0aiMemory(MemoryProgram):
    """The installed Mem0 behind the memory-program protocol (module docstring)."""

    name = "mem0ai"
    Config = Mem0aiConfig

    def __init__(self, config: Mem0aiConfig | None = None) -> None:
        super().__init__(config)
        cfg = self.config
        mem0 = import_mem0()
        version = installed_version() or "?"
        if version not in TESTED:
            log.warning("mem0ai %s is installed; the adapter is tested with %s", version, " and ".join(TESTED))
        self.pipeline = pipeline_of(version)
        self.add = Mem0Add()
        if self.pipeline is Pipeline.ADDITIVE:
            self.extract = AdditiveExtract(_additive_seed(cfg.custom_instructions), cfg.max_tokens)
            store_role = OpRole.FORMS
        else:
            prompts = mem0.configs.prompts
            self.extract_facts = ClassicExtractFacts(cfg.custom_fact_extraction_prompt
                                                     or prompts.USER_MEMORY_EXTRACTION_PROMPT, cfg.max_tokens)
            self.update_decision = ClassicUpdateDecision(cfg.custom_update_memory_prompt
                                                         or prompts.DEFAULT_UPDATE_MEMORY_PROMPT, cfg.max_tokens)
            store_role = OpRole.UPDATES  # an ADD the update decision chose
        self.store = Mem0Write("store", store_role)
        self.update = Mem0Write("update", OpRole.UPDATES)
        self.delete = Mem0Write("delete", OpRole.DELETES)
        self.search = Mem0Search()
        self.answer = Mem0Answer()

    def llm_steps(self) -> list[Mem0Call]:
        """The LLM ops in the order Mem0 calls them within one `add()`."""
        if self.pipeline is Pipeline.ADDITIVE:
            return [self.extract]
        return [self.extract_facts, self.update_decision]

    def mem0_config(self) -> dict[str, Any]:
        """The prompt keys of a Mem0 configuration that the instructions in force amount to: each key whose value
        is not Mem0's own (an empty dict when every prompt is Mem0's own)."""
        if self.pipeline is Pipeline.ADDITIVE:
            values = {self.extract.config_key: self.extract.mem0_value()}
        else:
            prompts = import_mem0().configs.prompts
            values = {
                self.extract_facts.config_key: self.extract_facts.mem0_value(prompts.USER_MEMORY_EXTRACTION_PROMPT),
                self.update_decision.config_key: self.update_decision.mem0_value(prompts.DEFAULT_UPDATE_MEMORY_PROMPT),
            }
        return {key: value for key, value in values.items() if value is not None}

    def deployment_files(self) -> dict[str, str]:
        return {MEM0_CONFIG_FILE: json.dumps(self.mem0_config(), indent=2, ensure_ascii=False) + "\n"}

    # the protocol ------------------------------------------------------------------------------------------------
    def new_state(self, conversation: Conversation) -> MemoryState:
        from memtrace_opt.programs.mem0ai.session import open_session

        store = MemoryStore(store_id=f"{self.name}:{conversation.sample_id}")
        embedder = get_embedder(self.config.embedder)
        index = SearchIndex(store, embedder, accept=lambda unit: False)  # Mem0 searches its own store
        state = MemoryState(conversation_id=conversation.sample_id, store=store, index=index)
        open_session(self, state, {**offline_config(embedder.dim), **self.mem0_config()})
        return state

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        turns = list(session.turns)
        step = self.config.window_turns
        for start in range(0, len(turns), step):
            self.add(turns=turns[start:start + step], session_date=session.date_time, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        units = self.search(question=question, k=self.config.top_k, state=state).units
        return self.answer(question=question, context=chronological(fit_units(units, self.config.context_tokens)))


def _additive_seed(custom: str | None) -> str:
    """2.x's instruction: the seed line, then the custom instructions a user set."""
    return f"{ADDITIVE_SEED}\n{custom.strip()}" if custom and custom.strip() else ADDITIVE_SEED
