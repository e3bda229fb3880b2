"""EverMemOS: segment the conversation into episodes (MemCells), enrich each with a narrative episode and an
event log, and answer with hybrid retrieval plus an LM sufficiency check that can ask for a second round.

Write path (turn by turn, into a buffer):
  `evermemos.detect_boundary`   does an episode end before the newest messages? Hard limits (tokens, messages)
                                and a new session force a boundary without the LM; otherwise the LM decides,
                                every `check_every` new messages (not every turn, to keep LM calls low)
  `evermemos.finalize_memcell`  writes a MemCell unit holding the episode's raw turns
  `evermemos.extract_episode`   LM: a narrative summary with absolute dates
  `evermemos.extract_event_log` LM: atomic facts, each with its time
  `evermemos.store_episode` / `evermemos.store_events`  write units linked to their MemCell (metadata
                                `memcell_id`, the MemCell's `source_turns`)
Read path: `evermemos.retrieve` (BM25 + dense fused by RRF, k=60) -> `evermemos.check_sufficiency` (LM) ->
if insufficient: `evermemos.generate_queries` (LM, 2-3 queries), `evermemos.retrieve` per query,
`evermemos.merge` (dedupe by unit, rerank by dense similarity to the question, keep the top N) ->
`evermemos.answer`. Foresight and profile memories are off, as in MemTrace's runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.data import Conversation, Question, Session, Turn
from memtrace_opt.embed import get_embedder
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.index import SearchIndex
from memtrace_opt.memory.ops import Operation, OperationFailed
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryStore, MemoryUnit
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import (
    AnswerOp,
    BoundedLMOperation,
    chronological,
    dated,
    echoes,
    estimate_tokens,
    fit_units,
    format_turns,
    format_units,
    question_text,
    strip_markers,
)
from memtrace_opt.programs.tunable import tunable

__all__ = [
    "EverMemOSConfig",
    "EverMemOS",
    "DetectBoundary",
    "FinalizeMemCell",
    "ExtractEpisode",
    "ExtractEventLog",
    "StoreEpisode",
    "StoreEvents",
    "HybridRetrieve",
    "CheckSufficiency",
    "GenerateQueries",
    "MergeRerank",
    "forced_boundary",
]

log = logging.getLogger(__name__)

MEMCELL, EPISODE, EVENT = "memcell", "episode", "event"
BUFFER_KEY, UNCHECKED_KEY = "evermemos.buffer", "evermemos.unchecked"


@dataclass(frozen=True)
class EverMemOSConfig(ProgramConfig):
    """EverMemOS (as MemTrace ran it): MemCells capped at 8,192 tokens or 50 messages with one message of
    overlap; BM25 top 50 + embedding top 50 fused by RRF (k=60); sufficiency check on the top 10; merge keeps
    30 after a Qwen3-Reranker-4B rerank. Here: MemCells capped at 2,048 tokens / 24 messages so an episode fits
    an 8k prompt, the LM checks for a boundary every 4 messages, and the merge keeps 12 (reranked by the
    embedder, the only reranker available offline)."""

    top_k: int = tunable(10, low=3, high=20, ops=("evermemos.retrieve", "evermemos.check_sufficiency"),
                         cost="longer sufficiency and answer prompts")  # retrieved per query
    max_memcell_tokens: int = 2048
    max_memcell_messages: int = tunable(24, low=4, high=40,
                                        ops=("evermemos.finalize_memcell", "evermemos.extract_episode",
                                             "evermemos.extract_event_log"),
                                        cost="smaller cells: more episode and event-log calls per conversation")
    overlap_messages: int = 1
    check_every: int = tunable(4, low=1, high=8, ops=("evermemos.detect_boundary",),
                               cost="checking more often: more boundary calls per conversation")
    split_on_new_session: bool = True
    max_turn_tokens: int = 400  # a very long message is clipped in extraction prompts
    hybrid_pool: int = 50
    rrf_k: int = 60
    max_queries: int = tunable(3, low=0, high=5, ops=("evermemos.generate_queries",),
                               cost="more follow-up queries: more retrieval rounds per question")
    merge_top_n: int = 12
    context_tokens: int = 3072

    def __post_init__(self) -> None:
        if self.max_memcell_messages < 2 or self.check_every < 1 or self.max_memcell_tokens < 64:
            raise ConfigError("evermemos: max_memcell_messages >= 2, check_every >= 1, max_memcell_tokens >= 64")
        if not 0 <= self.overlap_messages < self.max_memcell_messages:
            raise ConfigError("evermemos: overlap_messages must be in [0, max_memcell_messages)")


# boundary detection -------------------------------------------------------------------------------------
class DetectBoundarySignature(dspy.Signature):
    """You split a running conversation into episodes: stretches of talk about one topic or one event.
    Given the messages of the current episode so far and the newest messages, decide whether the newest
    messages start a new episode, so the current one is complete.
    Answer true when the newest messages turn to a clearly different topic or activity, open a new exchange
    after a long pause, or the current exchange has been wrapped up (goodbyes). Answer false when they
    continue, answer or elaborate the current topic. When unsure, answer false."""

    current_episode: str = dspy.InputField(desc="messages of the episode so far, dated")
    newest_messages: str = dspy.InputField()
    episode_ends: bool = dspy.OutputField(desc="true if the newest messages start a new episode")


def forced_boundary(history: Sequence[Turn], new_turns: Sequence[Turn], cfg: EverMemOSConfig) -> str | None:
    """Why a boundary before `new_turns` is forced without asking the LM, or None."""
    if not history:
        return None
    if cfg.split_on_new_session and new_turns and new_turns[0].session_index != history[-1].session_index:
        return "new session"
    combined = [*history, *new_turns]
    if len(combined) > cfg.max_memcell_messages:
        return f"message limit ({cfg.max_memcell_messages})"
    if estimate_tokens(format_turns(combined)) > cfg.max_memcell_tokens:
        return f"token limit ({cfg.max_memcell_tokens})"
    return None


def boundary_limits(cfg: EverMemOSConfig) -> dict[str, Any]:
    """The settings `detect_boundary` needs, passed as its input so the trace shows them."""
    names = ("max_memcell_tokens", "max_memcell_messages", "split_on_new_session", "max_turn_tokens")
    return {name: getattr(cfg, name) for name in names}


class DetectBoundary(BoundedLMOperation):
    """Whether the buffered `history` is a complete episode, the `new_turns` starting the next. Hard limits and
    a session change decide without the LM (`forced` says which); otherwise one LM call."""

    op_name = "evermemos.detect_boundary"
    role = OpRole.FORMS
    signature = DetectBoundarySignature
    reply_tokens = 48

    def run(self, history: Sequence[Turn], new_turns: Sequence[Turn], limits: dict[str, Any]) -> dspy.Prediction:
        cfg = EverMemOSConfig.from_dict(limits)
        forced = forced_boundary(history, new_turns, cfg)
        if forced is not None:
            return dspy.Prediction(episode_ends=True, forced=forced, error=None)
        if not history:
            return dspy.Prediction(episode_ends=False, forced=None, error=None)
        try:
            reply = self.ask(
                current_episode=format_turns(history, cfg.max_turn_tokens),
                newest_messages=format_turns(new_turns, cfg.max_turn_tokens),
            )
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(episode_ends=False, forced=None, error=str(error))
        return dspy.Prediction(episode_ends=bool(reply.episode_ends), forced=None, error=None)


class FinalizeMemCell(Operation):
    """Writes one MemCell: the episode's raw turns as a dated transcript."""

    op_name = "evermemos.finalize_memcell"
    role = OpRole.FORMS
    writes_store = True

    def run(self, turns: Sequence[Turn], state: MemoryState) -> dspy.Prediction:
        unit = state.store.add(
            format_turns(turns),
            kind=MEMCELL,
            timestamp=turns[0].timestamp,
            source_turns=tuple(dict.fromkeys(t.dia_id for t in turns)),
            metadata={"messages": len(turns), "end_timestamp": turns[-1].timestamp},
        )
        return dspy.Prediction(memcell=unit)


# extraction ---------------------------------------------------------------------------------------------
class ExtractEpisodeSignature(dspy.Signature):
    """Write the episodic memory of one conversation episode: a short third-person narrative (3 to 6
    sentences) of what the speakers said, did, planned and felt, naming each person.
    - Start with the date of the episode, and write every relative time as an absolute date: the episode
      date line says what expressions such as "yesterday" or "last Sunday" mean here; otherwise work them out
      from the episode date ("last year" said in 2023 is 2022).
    - Keep the specific details: names, places, numbers, titles, objects, what images show.
    - Say only what the conversation says."""

    episode_date: str = dspy.InputField(desc="when the episode took place, and what its relative dates mean")
    conversation: str = dspy.InputField()
    episode: str = dspy.OutputField(desc='the narrative in your own words, beginning "On <date>, ..."')


class ExtractEpisode(BoundedLMOperation):
    """A narrative summary of a MemCell with absolute dates."""

    op_name = "evermemos.extract_episode"
    role = OpRole.FORMS
    signature = ExtractEpisodeSignature
    reply_tokens = 320

    def run(self, memcell: MemoryUnit, turns: Sequence[Turn], max_turn_tokens: int = 400) -> dspy.Prediction:
        conversation = format_turns(turns, max_turn_tokens)
        when = dated(memcell.timestamp, conversation)
        try:
            reply = self.ask(episode_date=when, conversation=conversation)
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(episode="", error=str(error))
        episode = " ".join(strip_markers(str(reply.episode or "")).split())
        if echoes(episode, when, conversation):
            log.warning("%s: the reply only repeated the prompt", self.op_name)
            return dspy.Prediction(episode="", error=f"{self.op_name}: the reply only repeated the prompt")
        return dspy.Prediction(episode=episode, error=None)


class ExtractEventLogSignature(dspy.Signature):
    """List the events and facts of one conversation episode as an event log: atomic statements, one
    fact each, that name the person and carry the absolute date when it happened (the episode date line
    says what expressions such as "yesterday" or "last Sunday" mean here), or else the episode date.
    Keep names, places, numbers and what shared images show; leave out greetings and small talk.
    Return a JSON list of strings."""

    episode_date: str = dspy.InputField(desc="when the episode took place, and what its relative dates mean")
    conversation: str = dspy.InputField()
    events: list[str] = dspy.OutputField(desc='e.g. ["On 11 April 2021 Odalys joined a sea-swimming club."]')


class ExtractEventLog(BoundedLMOperation):
    """Atomic facts with times from a MemCell."""

    op_name = "evermemos.extract_event_log"
    role = OpRole.FORMS
    signature = ExtractEventLogSignature
    reply_tokens = 400

    def run(self, memcell: MemoryUnit, turns: Sequence[Turn], max_turn_tokens: int = 400) -> dspy.Prediction:
        conversation = format_turns(turns, max_turn_tokens)
        try:
            reply = self.ask(episode_date=dated(memcell.timestamp, conversation), conversation=conversation)
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(events=[], error=str(error))
        events = [" ".join(strip_markers(str(e)).split()) for e in (reply.events or [])]
        events = [e for e in events if e]
        return dspy.Prediction(events=list(dict.fromkeys(events)), error=None)


def _linked(memcell: MemoryUnit) -> dict[str, Any]:
    return {"memcell_id": memcell.unit_id, "memcell_version": memcell.version}


class StoreEpisode(Operation):
    """Writes the episode as a unit linked to its MemCell."""

    op_name = "evermemos.store_episode"
    role = OpRole.FORMS
    writes_store = True

    def run(self, memcell: MemoryUnit, episode: str, state: MemoryState) -> dspy.Prediction:
        unit = state.store.add(
            episode, kind=EPISODE, timestamp=memcell.timestamp, source_turns=memcell.source_turns, metadata=_linked(memcell)
        )
        return dspy.Prediction(unit=unit)


class StoreEvents(Operation):
    """Writes each event of the log as a unit linked to its MemCell."""

    op_name = "evermemos.store_events"
    role = OpRole.FORMS
    writes_store = True

    def run(self, memcell: MemoryUnit, events: Sequence[str], state: MemoryState) -> dspy.Prediction:
        units = [
            state.store.add(
                event, kind=EVENT, timestamp=memcell.timestamp, source_turns=memcell.source_turns, metadata=_linked(memcell)
            )
            for event in events
        ]
        return dspy.Prediction(units=units)


# read path ----------------------------------------------------------------------------------------------
class HybridRetrieve(Operation):
    """BM25 top-`pool` and dense top-`pool` over episodes and events, fused by RRF; the top `k` by fused score."""

    op_name = "evermemos.retrieve"
    role = OpRole.RETRIEVES

    def run(self, question: Question, query: str, k: int, state: MemoryState, pool: int = 50, rrf_k: int = 60) -> dspy.Prediction:
        hits = state.index.hybrid(query, k, pool=pool, rrf_k=rrf_k)
        units = state.store.read(hit.unit for hit in hits)
        return dspy.Prediction(units=units, scores=[round(hit.score, 6) for hit in hits])


class CheckSufficiencySignature(dspy.Signature):
    """Decide whether the retrieved memories are enough to answer the question. They are enough when they
    state the specific fact asked for, about the person the question names (for "when" questions, with
    its date). If they are not enough, say briefly what is missing."""

    context: str = dspy.InputField(desc="retrieved memories, dated")
    question: str = dspy.InputField()
    sufficient: bool = dspy.OutputField()
    missing_information: str = dspy.OutputField(desc="what is missing; empty when sufficient")


class CheckSufficiency(BoundedLMOperation):
    """Is the first-round context enough to answer? On failure it reports sufficient (no second round)."""

    op_name = "evermemos.check_sufficiency"
    role = OpRole.RETRIEVES
    signature = CheckSufficiencySignature
    reply_tokens = 96

    def run(self, question: Question, units: Sequence[MemoryUnit]) -> dspy.Prediction:
        try:
            reply = self.ask(context=format_units(units) or "(nothing found)", question=question_text(question))
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(sufficient=True, missing_information="", error=str(error))
        return dspy.Prediction(
            sufficient=bool(reply.sufficient), missing_information=str(reply.missing_information or ""), error=None
        )


class GenerateQueriesSignature(dspy.Signature):
    """The memories found so far do not answer the question. Write 2 or 3 short search queries that could
    find the missing information in the conversation memory: name the people involved, use other words
    for the key terms, and split a question about several things into one query per thing.
    Return a JSON list of strings."""

    context: str = dspy.InputField(desc="memories found so far")
    question: str = dspy.InputField()
    missing_information: str = dspy.InputField()
    queries: list[str] = dspy.OutputField()


class GenerateQueries(BoundedLMOperation):
    """2-3 follow-up queries for a second retrieval round (none on failure)."""

    op_name = "evermemos.generate_queries"
    role = OpRole.RETRIEVES
    signature = GenerateQueriesSignature
    reply_tokens = 128

    def run(self, question: Question, units: Sequence[MemoryUnit], missing_information: str, max_queries: int = 3) -> dspy.Prediction:
        try:
            reply = self.ask(
                context=format_units(units) or "(nothing found)",
                question=question_text(question),
                missing_information=missing_information or "(not stated)",
            )
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(queries=[], error=str(error))
        queries = [" ".join(str(q).split()) for q in (reply.queries or []) if str(q).strip()]
        return dspy.Prediction(queries=list(dict.fromkeys(queries))[:max_queries], error=None)


class MergeRerank(Operation):
    """Merges the rounds' results, dedupes by unit, reranks by dense similarity to the question, keeps `top_n`."""

    op_name = "evermemos.merge"
    role = OpRole.RETRIEVES

    def run(self, question: Question, rounds: Sequence[Sequence[MemoryUnit]], top_n: int, state: MemoryState) -> dspy.Prediction:
        unique: dict[str, MemoryUnit] = {}
        for units in rounds:
            for unit in units:
                unique.setdefault(unit.unit_id, unit)
        if not unique:
            return dspy.Prediction(units=[], scores=[])
        candidates = list(unique.values())
        embedder = state.index.embedder
        vectors = embedder.embed([unit.text for unit in candidates])
        query = embedder.embed([question.question])[0]
        scores = vectors @ query
        order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), i))[:top_n]
        kept = state.store.read(candidates[i] for i in order)
        return dspy.Prediction(units=kept, scores=[round(float(scores[i]), 6) for i in order])


class AnswerEverMemOS(AnswerOp):
    op_name = "evermemos.answer"


class EverMemOS(MemoryProgram):
    """Episodes (MemCells) with narrative and event-log memories; agentic two-round hybrid retrieval."""

    name = "evermemos"
    Config = EverMemOSConfig

    def __init__(self, config: EverMemOSConfig | None = None) -> None:
        super().__init__(config)
        self.detect_boundary = DetectBoundary()
        self.finalize_memcell = FinalizeMemCell()
        self.extract_episode = ExtractEpisode()
        self.extract_event_log = ExtractEventLog()
        self.store_episode = StoreEpisode()
        self.store_events = StoreEvents()
        self.retrieve = HybridRetrieve()
        self.check_sufficiency = CheckSufficiency()
        self.generate_queries = GenerateQueries()
        self.merge = MergeRerank()
        self.answer = AnswerEverMemOS()

    def new_state(self, conversation: Conversation) -> MemoryState:
        store = MemoryStore(store_id=f"{self.name}:{conversation.sample_id}")
        index = SearchIndex(store, get_embedder(self.config.embedder), accept=lambda unit: unit.kind in (EPISODE, EVENT))
        return MemoryState(conversation_id=conversation.sample_id, store=store, index=index)

    # write path -----------------------------------------------------------------------------------------
    def memorize_session(self, session: Session, state: MemoryState) -> None:
        cfg = self.config
        settings = boundary_limits(cfg)
        for turn in session.turns:
            buffer: list[Turn] = state.extra.setdefault(BUFFER_KEY, [])
            if forced_boundary(buffer, [turn], cfg) is not None:
                self.detect_boundary(history=list(buffer), new_turns=[turn], limits=settings)
                self._close_episode(list(buffer), state)
                keep = 0 if buffer and buffer[-1].session_index != turn.session_index else cfg.overlap_messages
                state.extra[BUFFER_KEY] = buffer = buffer[len(buffer) - keep :] if keep else []
                state.extra[UNCHECKED_KEY] = 0
            buffer.append(turn)
            unchecked = state.extra.get(UNCHECKED_KEY, 0) + 1
            state.extra[UNCHECKED_KEY] = unchecked
            if unchecked >= cfg.check_every and len(buffer) == unchecked:
                state.extra[UNCHECKED_KEY] = 0  # the episode's opening messages: nothing to compare with yet
            elif unchecked >= cfg.check_every:
                history, newest = buffer[:-unchecked], buffer[-unchecked:]
                decision = self.detect_boundary(history=list(history), new_turns=list(newest), limits=settings)
                if decision.episode_ends:
                    self._close_episode(list(history), state)
                    state.extra[BUFFER_KEY] = list(newest)
                state.extra[UNCHECKED_KEY] = 0

    def finish_memorize(self, state: MemoryState) -> None:
        buffer = state.extra.get(BUFFER_KEY) or []
        if buffer:
            self._close_episode(list(buffer), state)
        state.extra[BUFFER_KEY] = []
        state.extra[UNCHECKED_KEY] = 0

    def _close_episode(self, turns: list[Turn], state: MemoryState) -> None:
        if not turns:
            return
        cfg = self.config
        memcell = self.finalize_memcell(turns=turns, state=state).memcell
        episode = self.extract_episode(memcell=memcell, turns=turns, max_turn_tokens=cfg.max_turn_tokens).episode
        events = self.extract_event_log(memcell=memcell, turns=turns, max_turn_tokens=cfg.max_turn_tokens).events
        if episode:
            self.store_episode(memcell=memcell, episode=episode, state=state)
        if events:
            self.store_events(memcell=memcell, events=events, state=state)

    # read path ------------------------------------------------------------------------------------------
    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        cfg = self.config
        first = self.retrieve(
            question=question, query=question.question, k=cfg.top_k, state=state, pool=cfg.hybrid_pool, rrf_k=cfg.rrf_k
        ).units
        check = self.check_sufficiency(question=question, units=first)
        units = first
        if not check.sufficient:
            queries = self.generate_queries(
                question=question, units=first, missing_information=check.missing_information, max_queries=cfg.max_queries
            ).queries
            rounds = [first]
            for query in queries:
                rounds.append(
                    self.retrieve(
                        question=question, query=query, k=cfg.top_k, state=state, pool=cfg.hybrid_pool, rrf_k=cfg.rrf_k
                    ).units
                )
            units = self.merge(question=question, rounds=rounds, top_n=cfg.merge_top_n, state=state).units
        return self.answer(question=question, context=chronological(fit_units(units, cfg.context_tokens)))
