"""The operations of Mem0 as the trace sees them: each LLM call Mem0 makes, each write it makes to its vector
store, `add()` around them, and the question-time `search()` and answer.

An LLM call (`Mem0Call`) sends the messages Mem0 built, as they are, to the task LM of the context (so usage,
budgets and caches work as for any op), and parses the reply the way that Mem0 version does. Its instruction is the
part of Mem0's prompt a user may set (`config_key` in Mem0's configuration): rewriting it changes what Mem0 is
configured with, never the rest of Mem0's prompt. Its content key is the prompt itself (the messages and the
instruction), so a replay serves a recorded reply whenever Mem0 builds the same prompt again. Besides the
messages, a call records the turns and the memory units its prompt shows (typed lineage); outputs are derived
from the reply alone, ids as the LM wrote them, so a recorded reply fits any later run.

Writes (`Mem0Write`) mirror into the run's store what Mem0 has just stored under its own ids; the call inputs that
name what they store (`memories` texts, the LM's `actions`) link them to the LLM call that produced those.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import dspy

from memtrace_opt.data import Question, Turn
from memtrace_opt.memory.ops import LMOperation, Operation
from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.store import MemoryUnit, UnknownUnit
from memtrace_opt.memory.values import content_key, to_jsonable
from memtrace_opt.programs.base import MemoryState
from memtrace_opt.programs.common import AnswerOp

__all__ = [
    "ADDITIVE_SEED",
    "Mem0Call",
    "custom_instructions",
    "with_custom_instructions",
    "AdditiveExtract",
    "ClassicExtractFacts",
    "ClassicUpdateDecision",
    "Mem0Add",
    "Mem0Write",
    "Mem0Search",
    "Mem0Answer",
]

log = logging.getLogger(__name__)

# The instruction of 2.x's extraction while no custom instructions are set; a rewrite that keeps it as its first line
# passes only the lines after it to Mem0 (see `AdditiveExtract.mem0_value`).
ADDITIVE_SEED = "Extract the memories as the extraction prompt says."


def _read(reply: str, key: str) -> tuple[Any, str | None]:
    """`key` of a reply parsed as Mem0 parses it (code fences removed, then JSON, else the JSON found inside it),
    and None with why where Mem0 finds nothing: an empty reply, no JSON object, no such key."""
    from mem0.memory.utils import extract_json, remove_code_blocks

    text = reply
    try:
        text = remove_code_blocks(reply)
        if not text or not text.strip():
            return None, "the reply is empty"
        try:
            parsed = json.loads(text, strict=False)
        except json.JSONDecodeError:
            parsed = json.loads(extract_json(reply), strict=False)
    except Exception:  # noqa: BLE001 - Mem0 takes a reply it cannot parse as nothing
        return None, "the reply is not JSON" + (" (it ends before its JSON closes, as a reply cut at the reply cap "
                                                 "does)" if "{" in text and not text.rstrip().endswith("}") else "")
    if not isinstance(parsed, dict) or key not in parsed:
        return None, f'the reply has no "{key}"'
    return parsed[key], None


def _field(reply: str, key: str) -> Any:
    """`key` of a reply as Mem0 reads it; None where Mem0 finds nothing (`_read`)."""
    return _read(reply, key)[0]


class Mem0Call(LMOperation):
    """One LLM call of Mem0 (module docstring). Subclasses set the op, its Signature, `config_key` and `parse`."""

    config_key: ClassVar[str]
    reply_key: ClassVar[str]  # what Mem0 reads from the reply's JSON
    adapter_prompt = False  # Mem0 builds the prompt: a recorded call is re-run only where the op re-renders it

    def __init__(self, seed: str, max_tokens: int) -> None:
        super().__init__()
        self.predict.signature = self.predict.signature.with_instructions(seed)
        self.max_tokens = max_tokens

    def content_key(self, inputs: dict[str, Any]) -> str:
        return content_key(self.op_name, self.instruction, self._demos(), to_jsonable(inputs.get("messages")))

    def mem0_value(self, default: str | None) -> str | None:
        """What Mem0's configuration gets under `config_key`: None while the instruction is Mem0's own `default`."""
        text = self.instruction.strip()
        return None if default is not None and text == default.strip() else text

    def parse(self, reply: str) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def render(self, outputs: dspy.Prediction) -> str:  # pragma: no cover - abstract
        """A reply that Mem0 parses into `outputs`' parsed fields (the inverse of `parse`)."""
        raise NotImplementedError

    def reply_for_mem0(self, outputs: dspy.Prediction) -> str:
        """What Mem0 is handed for a call: the LM's reply; for outputs a replay forced (a counterfactual repair of
        the parsed fields, merged over the recorded ones), the reply those fields amount to."""
        if getattr(outputs, "_memtrace_replayed", None) == "forced":
            return self.render(outputs)
        return str(outputs.get("reply") or "")

    def run(self, messages: Sequence[dict[str, Any]], turns: Sequence[Turn] = (), existing: Sequence[MemoryUnit] = (),
            facts: Sequence[str] = ()) -> dspy.Prediction:
        try:
            reply = self._ask(list(messages))
        except Exception as error:  # noqa: BLE001 - a failed call is recorded; Mem0 sees an empty reply
            message = f"{self.op_name}: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
            if "context" in f"{type(error).__name__} {error}".lower():
                message += (" (Mem0's prompt is long: 2.x's extraction prompt alone is about 8k tokens; give the task "
                            "model more context, for the embedded one `extra: {n_ctx: 16384}`)")
            log.warning("%s", message)
            return dspy.Prediction(reply="", **self.parse(""), error=message)
        return dspy.Prediction(reply=reply, **self.parse(reply), error=self.unread(reply))

    def unread(self, reply: str) -> str | None:
        """Why Mem0 takes nothing from a reply it was given, or None when it reads it. Mem0 drops such a reply without
        a word; the trace records it as the call's error (a counted op failure), while the call stays the op that
        formed nothing: attribution blames it like any other reply, and a rewrite of its prompt can fix it."""
        _, why = _read(reply, self.reply_key)
        if why is None:
            return None
        message = f"{self.op_name}: Mem0 reads nothing from this reply ({why}; {len(reply)} characters)"
        log.warning("%s", message)
        return message

    def call_options(self) -> dict[str, Any]:
        """The options of each LLM call Mem0 makes through this op: its reply cap, and the JSON object Mem0 asks for."""
        return {"max_tokens": self.max_tokens, "response_format": {"type": "json_object"}}

    def _ask(self, messages: list[dict[str, Any]]) -> str:
        lm = dspy.settings.lm
        if lm is None:
            raise RuntimeError("no task LM is configured (dspy.context(lm=...))")
        with warnings.catch_warnings():  # Mem0's messages go as the message dicts DSPy 3.4's adapters send too
            warnings.simplefilter("ignore", DeprecationWarning)
            outputs = lm(messages=messages, **self.call_options())
        first = outputs[0] if outputs else ""
        return str(first.get("text") or "") if isinstance(first, dict) else str(first)


# 2.x ------------------------------------------------------------------------------------------------------------
class AdditiveExtraction(dspy.Signature):
    """Extract the memories as the extraction prompt says."""

    messages: list[dict[str, str]] = dspy.InputField(
        desc="Mem0's extraction prompt: its system prompt, then the last messages, existing memories, new messages, "
             "dates and these custom instructions")
    reply: str = dspy.OutputField(desc='JSON: {"memory": [{"id": "0", "text": "...", "attributed_to": "user"}]}')


class AdditiveExtract(Mem0Call):
    """2.x's one LLM call per `add()`: new memories from the new messages, shown the similar existing ones."""

    op_name = "mem0ai.extract"
    role = OpRole.FORMS
    signature = AdditiveExtraction
    config_key = "custom_instructions"
    reply_key = "memory"

    def mem0_value(self, default: str | None = None) -> str | None:
        """The custom instructions: the instruction without its seed line; None when nothing else is left."""
        return custom_instructions(self.instruction)

    def rerender(self, prompt: str, instruction: str) -> list[dict[str, str]] | None:
        """The messages Mem0 sends for a recorded call whose user message is `prompt` when configured with
        `instruction`'s custom instructions (`custom_instructions`): Mem0's system prompt, and `prompt` with its
        "## Custom Instructions" section replaced (left out where `instruction` sets none). The rest of the prompt
        (the memories and messages it showed, its dates) stays as recorded. None for a prompt not laid out as 2.x
        lays it out (no "## Current Date" section, or no "# Output:" line after it)."""
        user = with_custom_instructions(prompt, custom_instructions(instruction))
        return None if user is None else [_system_message(), {"role": "user", "content": user}]

    def prompt_head(self, instruction: str) -> list[dict[str, str]]:
        """Mem0's system prompt and the custom instructions section `instruction` adds to each call's user message."""
        custom = custom_instructions(instruction)
        return [_system_message(), {"role": "user", "content": f"{_CUSTOM.strip()}\n{custom}" if custom else ""}]

    def read_outputs(self, reply: str) -> dict[str, Any] | None:
        """A reply as Mem0 reads it (`parse`); None for one it reads nothing from (`unread`)."""
        return self.parse(reply) if _read(reply, self.reply_key)[1] is None else None

    def parse(self, reply: str) -> dict[str, Any]:
        """`memories`: the texts Mem0 goes on to embed and store (items that are objects with a text)."""
        items = _field(reply, "memory")
        texts = [item.get("text") for item in items if isinstance(item, dict)] if isinstance(items, list) else []
        return {"memories": [text for text in texts if isinstance(text, str) and text]}

    def render(self, outputs: dspy.Prediction) -> str:
        memories = [{"id": str(i), "text": text} for i, text in enumerate(outputs.get("memories") or [])]
        return json.dumps({"memory": memories}, ensure_ascii=False)


def custom_instructions(instruction: str) -> str | None:
    """What 2.x is configured with for the extraction's `instruction`: its lines after the seed line
    (`ADDITIVE_SEED`), or all of it when it does not start with that line; None when nothing is left."""
    text = instruction.strip()
    if text.startswith(ADDITIVE_SEED):
        text = text[len(ADDITIVE_SEED):].strip()
    return text or None


def _system_message() -> dict[str, str]:
    """2.x's extraction system message (a memory scoped by user, as the adapter's is)."""
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    return {"role": "system", "content": ADDITIVE_EXTRACTION_PROMPT}


_DATE = "\n\n## Current Date\n"
_CUSTOM = "\n\n## Custom Instructions\n"
_AFTER_CUSTOM = ("\n\n## Language Requirement\n", "\n\n# Output:")  # what 2.x puts after the custom instructions


def with_custom_instructions(prompt: str, custom: str | None) -> str | None:
    """2.x's extraction user message `prompt` with `custom` as its custom instructions: the section after the
    current date replaced, added or (`custom` None) removed, as `generate_additive_extraction_prompt` lays them out
    (sections joined by a blank line, the date one line). None where `prompt` is not laid out so."""
    at = prompt.rfind(_DATE)
    end = prompt.find("\n\n", at + len(_DATE)) if at >= 0 else -1
    if end < 0:
        return None
    rest = prompt[end:]
    if rest.startswith(_CUSTOM):
        found = [i for i in (rest.find(_AFTER_CUSTOM[0]), rest.rfind(_AFTER_CUSTOM[1])) if i > 0]
        if not found:
            return None
        rest = rest[min(found):]
    if not any(rest.startswith(mark) for mark in _AFTER_CUSTOM):
        return None
    return prompt[:end] + (f"{_CUSTOM}{custom}" if custom else "") + rest


# 1.0.x ----------------------------------------------------------------------------------------------------------
class FactExtraction(dspy.Signature):
    """Mem0's fact extraction prompt (its custom_fact_extraction_prompt)."""

    messages: list[dict[str, str]] = dspy.InputField(desc="this prompt as the system message, then the messages")
    reply: str = dspy.OutputField(desc='JSON: {"facts": ["..."]}')


class ClassicExtractFacts(Mem0Call):
    """1.0's first call of `add()`: facts from the new messages."""

    op_name = "mem0ai.extract_facts"
    role = OpRole.FORMS
    signature = FactExtraction
    config_key = "custom_fact_extraction_prompt"
    reply_key = "facts"

    def parse(self, reply: str) -> dict[str, Any]:
        from mem0.memory.utils import normalize_facts

        try:
            facts = normalize_facts(_field(reply, "facts"))
        except Exception:  # noqa: BLE001 - as Mem0: facts of a shape it cannot read are no facts
            facts = []
        return {"facts": [str(fact) for fact in facts]}

    def render(self, outputs: dspy.Prediction) -> str:
        return json.dumps({"facts": list(outputs.get("facts") or [])}, ensure_ascii=False)


class MemoryUpdateDecision(dspy.Signature):
    """Mem0's update prompt (its custom_update_memory_prompt)."""

    messages: list[dict[str, str]] = dspy.InputField(
        desc="this prompt, then the existing memories (ids 0, 1, ...) and the new facts")
    reply: str = dspy.OutputField(desc='JSON: {"memory": [{"id", "text", "event": "ADD|UPDATE|DELETE|NONE"}]}')


class ClassicUpdateDecision(Mem0Call):
    """1.0's second call of `add()`: ADD / UPDATE / DELETE / NONE for the facts against similar memories."""

    op_name = "mem0ai.update_decision"
    role = OpRole.UPDATES
    signature = MemoryUpdateDecision
    config_key = "custom_update_memory_prompt"
    reply_key = "memory"

    def parse(self, reply: str) -> dict[str, Any]:
        """`memory_actions`: the action objects as the LM wrote them (ids are positions in the memories shown)."""
        items = _field(reply, "memory")
        return {"memory_actions": [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []}

    def render(self, outputs: dspy.Prediction) -> str:
        return json.dumps({"memory": list(outputs.get("memory_actions") or [])}, ensure_ascii=False)


# add(), writes, search ------------------------------------------------------------------------------------------
class Mem0Add(Operation):
    """One `add()` of a window of turns; the LLM calls and writes Mem0 makes inside it are its nested ops.
    `memories`: the unit versions it wrote; `dropped`: what the LLM returned that Mem0 did not store, and why."""

    op_name = "mem0ai.add"
    role = OpRole.NONE  # the calls inside it are the ones that decide
    writes_store = True

    def run(self, turns: Sequence[Turn], session_date: str | None, state: MemoryState) -> dspy.Prediction:
        from memtrace_opt.programs.mem0ai.session import session_of

        return session_of(state).add(turns, session_date)


class Mem0Write(Operation):
    """A write Mem0 made to its vector store, mirrored into the run's store under Mem0's id: `mem0ai.store`
    (inserts), `mem0ai.update` (a new version), `mem0ai.delete` (the unit marked deleted)."""

    writes_store = True

    def __init__(self, action: Literal["store", "update", "delete"], role: OpRole) -> None:
        super().__init__()
        self.action = action
        setattr(self, "op_name", f"mem0ai.{action}")  # noqa: B010 - an instance's name shadows the class default
        setattr(self, "role", role)  # noqa: B010

    def run(self, ids: Sequence[str], state: MemoryState, memories: Sequence[str] | None = None,
            actions: Sequence[dict[str, Any]] | None = None) -> dspy.Prediction:
        from memtrace_opt.programs.mem0ai.session import session_of

        window = session_of(state).window
        sources = tuple(t.dia_id for t in window.turns) if window else ()
        when = window.session_date if window else None
        texts = list(memories) if memories is not None else [str(a.get("text") or "") for a in actions or []]
        units: list[MemoryUnit] = []
        for unit_id, text in zip(ids, texts, strict=False):
            try:
                if self.action == "store":
                    units.append(state.store.add(text, unit_id=unit_id, timestamp=when, source_turns=sources))
                elif self.action == "update":
                    units.append(state.store.update(unit_id, text, timestamp=when, source_turns=sources))
                else:
                    units.append(state.store.delete(unit_id))
            except (UnknownUnit, ValueError) as error:
                log.warning("%s: %s not mirrored: %s", self.op_name, unit_id, error)
        return dspy.Prediction(units=units)


class Mem0Search(Operation):
    """`search()` for the question: the `k` memories Mem0 returns, as the run's unit versions, with Mem0's scores."""

    op_name = "mem0ai.search"
    role = OpRole.RETRIEVES

    def run(self, question: Question, k: int, state: MemoryState) -> dspy.Prediction:
        from memtrace_opt.programs.mem0ai.session import session_of

        found = session_of(state).search(question.question, k)
        units, scores = [], []
        for unit_id, score in found:
            try:
                units.append(state.store.get(unit_id))
                scores.append(round(float(score), 6) if score is not None else None)
            except UnknownUnit:
                log.warning("mem0ai.search: Mem0 returned %s, which no traced write stored", unit_id)
        return dspy.Prediction(units=state.store.read(units), scores=scores)


class Mem0Answer(AnswerOp):
    op_name = "mem0ai.answer"
