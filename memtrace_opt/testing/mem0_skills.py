"""Fake-LM skills for the prompts the real Mem0 library builds (`--system mem0ai`): they read Mem0's prompt, answer
through the same rules as the skills of our own Signatures (`skills.py`), and reply in the JSON that Mem0 version
parses. Each claims its prompts by `when`: Mem0's prompts are not written by a DSPy adapter, so they ask for no
output field.

| skill | Mem0's call | what it does |
|---|---|---|
| `mem0ai.extract` | 2.x extraction: system prompt "Memory Extractor", user prompt in "## ..." sections | the `facts` skill over the New Messages, with the Custom Instructions section as its instruction (no "date" there: facts with a time word or number are dropped); every fact returned, even one an existing memory holds (Mem0 drops those by hash) |
| `mem0ai.extract_facts` | 1.0 fact extraction: user prompt "Input:\\n..." | the `facts` skill with the system prompt as its instruction (Mem0's own mentions the date, so dates are kept) |
| `mem0ai.update_decision` | 1.0 update decision: "The new retrieved facts are mentioned in the triple backticks" | the `memory_actions` skill over the memories and facts the prompt lists, with the text before them as its instruction |
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from memtrace_opt.testing.fake_lm import FakeCall, FakeReply, Skill
from memtrace_opt.testing.skills import decide_memory_actions, extract_facts

__all__ = ["mem0_skills", "mem0_prompt_sections", "mem0_messages"]

_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_DECISION_MARK = "The new retrieved facts are mentioned in the triple backticks"
_FENCED = re.compile(r"```\s*\n?(.*?)\n?\s*```", re.DOTALL)


def _text(call: FakeCall, role: str) -> str:
    return next((str(m.get("content") or "") for m in call.messages if m.get("role") == role), "")


def mem0_prompt_sections(prompt: str) -> dict[str, str]:
    """Section title -> body of a 2.x extraction user prompt ("## New Messages\\n...")."""
    marks = list(_SECTION.finditer(prompt))
    return {m.group(1).strip(): prompt[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(prompt)].strip()
            for i, m in enumerate(marks)}


def mem0_messages(lines: str) -> tuple[str, str]:
    """(the date line, a transcript "Speaker: text" per message) of Mem0's "role: content" message lines; the
    date line is the system message the adapter puts first ("These messages were said on ...")."""
    date, transcript = "", []
    for line in lines.splitlines():
        role, _, content = line.partition(": ")
        if role == "system":
            date = content
        elif role in ("user", "assistant") and content:
            transcript.append(content)
    return date, "\n".join(transcript)


def _facts(instruction: str, lines: str) -> list[str]:
    date, transcript = mem0_messages(lines)
    call = FakeCall(instruction, {"session_date": date, "new_messages": transcript}, ("facts",), ())
    return list(extract_facts(call)["facts"])


def additive_extract(call: FakeCall) -> dict[str, Any]:
    sections = mem0_prompt_sections(_text(call, "user"))
    facts = _facts(sections.get("Custom Instructions", ""), sections.get("New Messages", ""))
    memories = [{"id": str(i), "text": fact, "attributed_to": "user"} for i, fact in enumerate(facts)]
    raise FakeReply(json.dumps({"memory": memories}, ensure_ascii=False))


def classic_extract_facts(call: FakeCall) -> dict[str, Any]:
    lines = _text(call, "user").removeprefix("Input:").strip()
    raise FakeReply(json.dumps({"facts": _facts(_text(call, "system"), lines)}, ensure_ascii=False))


def _literal(block: str) -> Any:
    try:
        return ast.literal_eval(block.strip())
    except (ValueError, SyntaxError):
        return []


def classic_update_decision(call: FakeCall) -> dict[str, Any]:
    prompt = _text(call, "user")
    head, _, rest = prompt.partition("Below is the current content of my memory")
    if not rest:
        head = prompt.split("Current memory is empty", 1)[0]
    blocks = _FENCED.findall(prompt[len(head):])
    memories = _literal(blocks[0]) if len(blocks) > 1 else []
    facts = _literal(blocks[-1]) if blocks else []
    inputs = {"existing_memories": json.dumps(memories), "new_facts": json.dumps(facts)}
    actions = decide_memory_actions(FakeCall(head, inputs, ("memory_actions",), ()))["memory_actions"]
    fresh = len(memories)
    out = []
    for action in actions:
        if action["event"] == "ADD":
            action = {**action, "id": str(fresh)}
            fresh += 1
        out.append({"id": action["id"], "text": action["text"], "event": action["event"]})
    raise FakeReply(json.dumps({"memory": out}, ensure_ascii=False))


def mem0_skills() -> list[Skill]:
    """The skills for Mem0's three prompts (module docstring)."""
    return [
        Skill(outputs=(), fn=additive_extract, name="mem0ai.extract",
              when=lambda call: "Memory Extractor" in _text(call, "system")),
        Skill(outputs=(), fn=classic_update_decision, name="mem0ai.update_decision",
              when=lambda call: _DECISION_MARK in _text(call, "user")),
        Skill(outputs=(), fn=classic_extract_facts, name="mem0ai.extract_facts",
              when=lambda call: _text(call, "user").startswith("Input:\n") and "[[ ## " not in _text(call, "user")),
    ]
