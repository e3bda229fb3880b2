"""Mem0 (the classic two-phase pipeline): extract facts, compare them with similar memories, let the LM decide
ADD / UPDATE / DELETE / NONE for each, apply the decisions; answer from the memories most similar to the question.

Write path, per window of `window_turns` turns of a session:
  `mem0.extract_facts`   LM: durable, self-contained facts (names and absolute dates) from the latest messages
  `mem0.search_similar`  per fact, the top `similar_k` live memories by embedding (no LM)
  `mem0.update_decision` LM: one call for all the window's facts against the union of their similar memories,
                         whose ids are shown remapped to "0", "1", ... so the LM cannot invent ids
  `mem0.apply`           writes: ADD a unit, UPDATE makes a new version, DELETE marks the unit deleted
Read path: `mem0.retrieve` (dense top-k live memories) then `mem0.answer`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from memtrace_opt.data import Question, Session, Turn
from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.ops import Operation, OperationFailed
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryUnit, UnknownUnit
from memtrace_opt.programs.base import MemoryProgram, MemoryState, ProgramConfig
from memtrace_opt.programs.common import (
    PROMPT_OVERHEAD_TOKENS,
    AnswerOp,
    BoundedLMOperation,
    chronological,
    dated,
    fit_units,
    format_turns,
)
from memtrace_opt.programs.tunable import tunable

__all__ = [
    "Mem0Config",
    "Mem0Memory",
    "ExtractFacts",
    "SearchSimilar",
    "UpdateDecision",
    "ApplyActions",
    "RetrieveMemories",
    "EVENTS",
]

log = logging.getLogger(__name__)

MEMORY_KIND = "memory"
EVENTS = ("ADD", "UPDATE", "DELETE", "NONE")


@dataclass(frozen=True)
class Mem0Config(ProgramConfig):
    """Mem0 extracts from the messages of each `add()` call and compares each fact with its 5 most similar
    memories; MemTrace ran it on gpt-4.1-mini with top-k 10 for QA. Here facts are extracted per window of 6
    turns (one extraction and one decision call per window) to keep LM calls low on a local model;
    `context_turns` earlier turns may be shown for reference resolution only (none by default, as in Mem0)."""

    top_k: int = tunable(10, low=3, high=20, ops=("mem0.retrieve", "mem0.answer"),
                         cost="more memories in every answer prompt")
    window_turns: int = tunable(6, low=1, high=8, ops=("mem0.extract_facts", "mem0.update_decision"),
                                cost="smaller windows: more extraction and decision calls per conversation")
    context_turns: int = tunable(0, low=0, high=6, ops=("mem0.extract_facts",),
                                 cost="longer extraction prompts")  # earlier turns shown as context (Mem0 shows none)
    similar_k: int = tunable(5, low=1, high=10, ops=("mem0.search_similar", "mem0.update_decision"),
                             cost="longer decision prompts")  # Mem0: 5 similar memories per new fact
    # Only memories at least this similar (cosine) are shown to the update decision. Mem0's default search has no
    # threshold; a small local model shown unrelated memories "updates" them by position, erasing them, so the
    # default (None) keeps what the embedder calls related (`Embedder.related_score`: 0.55 for MiniLM).
    similar_min_score: float | None = tunable(None, low=0.3, high=0.8, ops=("mem0.search_similar", "mem0.update_decision"),
                                              cost="a lower threshold: longer decision prompts")
    max_turn_tokens: int = 400  # a very long message is clipped in the extraction prompt
    context_tokens: int = 8192 - 1024 - PROMPT_OVERHEAD_TOKENS

    def __post_init__(self) -> None:
        if self.window_turns < 1 or self.similar_k < 1 or self.top_k < 1 or self.context_turns < 0:
            raise ConfigError("mem0: window_turns, similar_k and top_k must be at least 1, context_turns at least 0")


# extraction ---------------------------------------------------------------------------------------------
class ExtractFactsSignature(dspy.Signature):
    """You keep the long-term memory of a conversation between people. Read the new messages and write down
    the facts worth remembering about the speakers: who they are, their family, friends and pets, work and
    studies, places they live or visit, possessions, hobbies, plans, preferences, opinions, feelings, and
    the events they report.
    - Each fact is one short, self-contained sentence that names the person (never "I", "he", "she" or "my").
    - Keep dates, times, places, names and numbers. Write absolute dates instead of relative ones: the
      session date line says what expressions such as "yesterday" or "last Sunday" mean in these messages;
      otherwise work them out from the session date ("last year" said in 2023 is "in 2022").
    - Include what is said in image descriptions when it says something about the speaker.
    - Use the earlier messages only to understand the new ones; take facts from the new messages only.
    - Skip greetings, small talk and questions that carry no information. Write each fact once, and
      no more than ten facts in all.
    Return a JSON list of strings; an empty list if there is nothing worth remembering."""

    session_date: str = dspy.InputField(desc="when the new messages were said, and what their relative dates mean")
    earlier_messages: str = dspy.InputField(desc="context only; may be empty")
    new_messages: str = dspy.InputField()
    facts: list[str] = dspy.OutputField(desc='e.g. ["Odalys joined a sea-swimming club on 11 April 2021."]')


class ExtractFacts(BoundedLMOperation):
    """Durable facts from the latest messages (a JSON list of strings)."""

    op_name = "mem0.extract_facts"
    role = OpRole.FORMS
    signature = ExtractFactsSignature
    reply_tokens = 320

    def run(self, messages: Sequence[Turn], earlier: Sequence[Turn], session_date: str | None, max_turn_tokens: int = 400) -> dspy.Prediction:
        new_messages = format_turns(messages, max_turn_tokens)
        try:
            reply = self.ask(
                session_date=dated(session_date, new_messages),
                earlier_messages=format_turns(earlier, max_turn_tokens) or "(none)",
                new_messages=new_messages,
            )
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(facts=[], error=str(error))
        facts = [" ".join(str(f).split()) for f in (reply.facts or []) if str(f).strip()]
        return dspy.Prediction(facts=list(dict.fromkeys(facts)), error=None)


# similarity search --------------------------------------------------------------------------------------
class SearchSimilar(Operation):
    """For each fact, the `k` live memories whose embeddings are closest to it and at least `min_score` similar
    (by default the embedder's `related_score`); plus their union, in order."""

    op_name = "mem0.search_similar"
    role = OpRole.UPDATES

    def run(self, facts: Sequence[str], k: int, state: MemoryState, min_score: float | None = None) -> dspy.Prediction:
        if min_score is None:
            min_score = float(getattr(state.index.embedder, "related_score", 0.0))
        similar: list[dict[str, Any]] = []
        union: dict[str, MemoryUnit] = {}
        for fact in facts:
            hits = [hit for hit in state.index.dense(fact, k) if hit.score >= min_score]
            similar.append({"fact": fact, "memories": [h.unit for h in hits], "scores": [round(h.score, 6) for h in hits]})
            for hit in hits:
                union.setdefault(hit.unit.unit_id, hit.unit)
        memories = state.store.read(union.values())
        return dspy.Prediction(similar=similar, memories=memories)


# update decision ----------------------------------------------------------------------------------------
class UpdateDecisionSignature(dspy.Signature):
    """You maintain a memory store. Compare each new fact with the existing memories and decide one action
    per fact:
    - ADD: the fact is new information that no existing memory holds. Give its text.
    - UPDATE: the fact is about the same person and the same subject as an existing memory and adds to it or
      changes it; give that memory's id and the merged text, which keeps the details of both (dates, names,
      places). Never update a memory about another subject: a fact on a new subject is an ADD.
    - DELETE: the fact shows an existing memory is no longer true (a cancelled plan, a changed job, a
      contradiction); give that memory's id.
    - NONE: the fact is already in memory as it stands; give that memory's id.
    An id names one of the existing memories listed; it has nothing to do with the position of a new fact.
    Use only those ids. Return a JSON list with one object per new fact:
    {"event": "ADD" | "UPDATE" | "DELETE" | "NONE", "id": "<existing id, or empty for ADD>", "text": "<memory text>"}."""

    existing_memories: str = dspy.InputField(desc='JSON list of {"id", "text"}')
    new_facts: str = dspy.InputField(desc="JSON list of strings")
    memory_actions: list[dict[str, Any]] = dspy.OutputField(desc="one {event, id, text} object per new fact")


class UpdateDecision(BoundedLMOperation):
    """One LM call for a window's facts against the union of their similar memories. The memories' unit ids
    are shown as "0", "1", ... and mapped back; actions naming any other id are skipped and counted."""

    op_name = "mem0.update_decision"
    role = OpRole.UPDATES
    signature = UpdateDecisionSignature
    reply_tokens = 640

    @staticmethod
    def read_actions(items: Sequence[Any], id_map: dict[str, str]) -> tuple[list[dict[str, Any]], int, int]:
        """How this op reads its LM's action items (`map_actions`): what the optimizer writes a repair back by."""
        return map_actions(items, id_map)

    def run(self, facts: Sequence[str], memories: Sequence[MemoryUnit]) -> dspy.Prediction:
        facts = list(facts)
        if not memories:  # nothing to compare with: every fact is new (no LM call, as there is nothing to decide)
            actions = [{"event": "ADD", "unit_id": None, "text": fact} for fact in facts]
            return dspy.Prediction(memory_actions=actions, invalid_ids=0, invalid_items=0, lm_skipped=True, error=None)
        id_map = {str(i): unit.unit_id for i, unit in enumerate(memories)}
        shown = [{"id": str(i), "text": unit.text} for i, unit in enumerate(memories)]
        try:
            reply = self.ask(
                existing_memories=json.dumps(shown, ensure_ascii=False), new_facts=json.dumps(facts, ensure_ascii=False)
            )
        except OperationFailed as error:
            log.warning("%s failed: %s", self.op_name, error)
            return dspy.Prediction(memory_actions=[], invalid_ids=0, invalid_items=0, lm_skipped=False, error=str(error))
        actions, invalid_ids, invalid_items = map_actions(reply.memory_actions or [], id_map)
        if invalid_ids or invalid_items:
            log.info("%s: skipped %d unknown ids, %d malformed items", self.op_name, invalid_ids, invalid_items)
        return dspy.Prediction(
            memory_actions=actions, invalid_ids=invalid_ids, invalid_items=invalid_items, lm_skipped=False, error=None
        )

    @staticmethod
    def live_after(fields: Mapping[str, str], outputs: Mapping[str, Any]) -> list[str] | None:
        """What one call leaves live, read from its prompt's fields and its reply as `run` reads them: the memories
        it was shown with its actions applied (an UPDATE's merged text in place, a DELETE's memory gone) and the
        texts it ADDs. A new fact no action keeps is not among them. None when the shown memories do not parse."""
        try:
            shown = json.loads(fields["existing_memories"])
            live = {str(item["id"]): str(item["text"]) for item in shown}
        except (KeyError, TypeError, ValueError):
            return None
        actions, _, _ = map_actions(outputs.get("memory_actions") or [], {key: key for key in live})
        added: list[str] = []
        for action in actions:
            if action["event"] == "ADD":
                added.append(action["text"])
            elif action["event"] == "UPDATE" and action["unit_id"] in live:
                live[action["unit_id"]] = action["text"]
            elif action["event"] == "DELETE":
                live.pop(action["unit_id"], None)
        return [*live.values(), *added]


def map_actions(items: Sequence[Any], id_map: dict[str, str]) -> tuple[list[dict[str, Any]], int, int]:
    """LM action items -> `{event, unit_id, text}` with real unit ids. Returns (actions, unknown ids, malformed).

    An item is malformed when it is not an object, names no known event, or is an ADD/UPDATE without text;
    an UPDATE/DELETE/NONE whose id is not one of those shown counts as an unknown id. Both are skipped."""
    actions: list[dict[str, Any]] = []
    invalid_ids = invalid_items = 0
    for item in items:
        if not isinstance(item, dict):
            invalid_items += 1
            continue
        event = str(item.get("event", "")).strip().upper()
        text = " ".join(str(item.get("text") or "").split())
        raw_id = item.get("id")
        shown_id = "" if raw_id is None else str(raw_id).strip()
        if event not in EVENTS or (event in ("ADD", "UPDATE") and not text):
            invalid_items += 1
            continue
        if event == "ADD":
            actions.append({"event": "ADD", "unit_id": None, "text": text})
            continue
        if shown_id not in id_map:
            invalid_ids += 1
            continue
        actions.append({"event": event, "unit_id": id_map[shown_id], "text": text})
    return actions, invalid_ids, invalid_items


# applying -----------------------------------------------------------------------------------------------
class ApplyActions(Operation):
    """Writes the decisions: ADD a unit, UPDATE a new version (text replaced by the merged text), DELETE marks
    the unit deleted, NONE nothing. An action on a unit that an earlier action of the same window deleted is
    skipped and counted."""

    op_name = "mem0.apply"
    role = OpRole.UPDATES
    writes_store = True

    def run(self, actions: Sequence[dict[str, Any]], turns: Sequence[Turn], session_date: str | None, state: MemoryState) -> dspy.Prediction:
        sources = tuple(turn.dia_id for turn in turns)
        added: list[MemoryUnit] = []
        updated: list[MemoryUnit] = []
        deleted: list[MemoryUnit] = []
        skipped = 0
        for action in actions:
            event = action["event"]
            try:
                if event == "ADD":
                    added.append(state.store.add(action["text"], kind=MEMORY_KIND, timestamp=session_date, source_turns=sources))
                elif event == "UPDATE":
                    updated.append(
                        state.store.update(action["unit_id"], action["text"], timestamp=session_date, source_turns=sources)
                    )
                elif event == "DELETE":
                    deleted.append(state.store.delete(action["unit_id"]))
            except UnknownUnit:
                skipped += 1
        return dspy.Prediction(added=added, updated=updated, deleted=deleted, skipped=skipped)


# read path ----------------------------------------------------------------------------------------------
class RetrieveMemories(Operation):
    """The `k` live memories most similar to the question (dense)."""

    op_name = "mem0.retrieve"
    role = OpRole.RETRIEVES

    def run(self, question: Question, k: int, state: MemoryState) -> dspy.Prediction:
        hits = state.index.dense(question.question, k)
        units = state.store.read(hit.unit for hit in hits)
        return dspy.Prediction(units=units, scores=[round(hit.score, 6) for hit in hits])


class AnswerMem0(AnswerOp):
    op_name = "mem0.answer"


class Mem0Memory(MemoryProgram):
    """Mem0's classic extract -> search -> decide -> apply pipeline over one shared memory for all speakers."""

    name = "mem0"
    Config = Mem0Config

    def __init__(self, config: Mem0Config | None = None) -> None:
        super().__init__(config)
        self.extract_facts = ExtractFacts()
        self.search_similar = SearchSimilar()
        self.update_decision = UpdateDecision()
        self.apply = ApplyActions()
        self.retrieve = RetrieveMemories()
        self.answer = AnswerMem0()

    def memorize_session(self, session: Session, state: MemoryState) -> None:
        cfg = self.config
        turns = list(session.turns)
        for start in range(0, len(turns), cfg.window_turns):
            window = turns[start : start + cfg.window_turns]
            earlier = turns[max(0, start - cfg.context_turns) : start]
            self.memorize_window(window, earlier, session.date_time, state)

    def memorize_window(self, window: list[Turn], earlier: list[Turn], session_date: str | None, state: MemoryState) -> None:
        cfg = self.config
        facts = self.extract_facts(
            messages=window, earlier=earlier, session_date=session_date, max_turn_tokens=cfg.max_turn_tokens
        ).facts
        if not facts:
            return
        found = self.search_similar(facts=facts, k=cfg.similar_k, state=state, min_score=cfg.similar_min_score)
        decision = self.update_decision(facts=facts, memories=found.memories)
        if decision.memory_actions:
            self.apply(actions=decision.memory_actions, turns=window, session_date=session_date, state=state)

    def respond(self, question: Question, state: MemoryState) -> dspy.Prediction:
        cfg = self.config
        units = self.retrieve(question=question, k=cfg.top_k, state=state).units
        context = fit_units(units, cfg.context_tokens)
        return self.answer(question=question, context=chronological(context))
