"""Read a DSPy ChatAdapter / JSONAdapter prompt back into instruction, input values and output fields.

The system message lists the fields ("Your input fields are: 1. `name` (type): ...") and ends with
"In adhering to this structure, your objective is: <instructions>"; each user message holds
"[[ ## field ## ]]\\nvalue" blocks. Few-shot demos come as earlier user/assistant pairs, so the last
user message is the request. JSONAdapter prompts differ only in the output-format text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OBJECTIVE = "In adhering to this structure, your objective is:"
_FIELD_LINE = re.compile(r"^\d+\. `([^`]+)`(?: \((.*?)\)(?=:|$))?", re.MULTILINE)
_MARKER = re.compile(r"^\[\[ ## (\w+) ## \]\]$", re.MULTILINE)
_REQUIREMENT_PREFIXES = ("Respond with the corresponding output fields", "Respond with a JSON object")
_REQUIREMENT_FIELD = re.compile(r"`(?:\[\[ ## )?(\w+)(?: ## \]\])?`")


@dataclass(frozen=True)
class ParsedPrompt:
    """What a DSPy adapter asked: `json_output` is True for a JSONAdapter prompt."""

    instruction: str
    input_fields: tuple[str, ...]
    output_fields: tuple[str, ...]
    inputs: dict[str, str]
    json_output: bool
    output_types: dict[str, str]  # field -> the type the adapter printed ("str", "list[str]", ...)


def _section(system: str, start: str, end: str) -> str:
    head, found, rest = system.partition(start)
    if not found:
        return ""
    return rest.split(end, 1)[0]


def parse_instruction(system: str) -> str:
    """The signature instructions, undoing the adapter's 8-space continuation indent."""
    _, found, rest = system.rpartition(OBJECTIVE)
    if not found:
        return ""
    lines = rest.split("\n")
    body = [line[8:] if line.startswith(" " * 8) else line.lstrip() for line in lines[1:]]
    if lines[0].strip():
        body.insert(0, lines[0].strip())
    return "\n".join(body).strip()


def _requirement_split(text: str) -> tuple[str, str]:
    """Split the final "Respond with ..." reminder off a user message."""
    for prefix in _REQUIREMENT_PREFIXES:
        at = text.rfind("\n\n" + prefix)
        if at >= 0:
            return text[:at], text[at + 2 :]
        if text.startswith(prefix):
            return "", text
    return text, ""


def parse_fields(text: str, known: tuple[str, ...] = ()) -> dict[str, str]:
    """The `[[ ## name ## ]]` blocks of a message, in order; with `known`, other markers stay in values."""
    blocks: dict[str, str] = {}
    marks = [m for m in _MARKER.finditer(text) if not known or m.group(1) in known]
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        blocks[mark.group(1)] = text[mark.end() : end].strip("\n")
    return blocks


def system_and_last_user(messages: Sequence[Mapping[str, str]]) -> tuple[str, str]:
    """The system message (empty if the first message is not one) and the last user message of a chat."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return system, last_user


def parse_prompt(system: str, last_user: str) -> ParsedPrompt:
    """Parse one adapter prompt. Unknown layouts yield empty fields, never an exception."""
    input_fields = tuple(n for n, _ in _FIELD_LINE.findall(_section(system, "Your input fields are:", "Your output fields are:")))
    typed = _FIELD_LINE.findall(_section(system, "Your output fields are:", "All interactions"))
    output_fields = tuple(name for name, _ in typed)
    body, requirement = _requirement_split(last_user)
    if not output_fields and requirement:
        output_fields = tuple(f for f in _REQUIREMENT_FIELD.findall(requirement) if f != "completed")
    json_output = "Outputs will be a JSON object" in system or requirement.startswith("Respond with a JSON object")
    return ParsedPrompt(
        instruction=parse_instruction(system),
        input_fields=input_fields,
        output_fields=output_fields,
        inputs=parse_fields(body, input_fields),
        json_output=json_output,
        output_types={name: kind for name, kind in typed if kind},
    )


def call_shape(messages: Any) -> str:
    """Which kind of call a chat is, as the estimate names it: its adapter prompt's output fields joined by "+"
    ("answer", "facts+reasoning"), or "raw" for messages no adapter built (a library's own prompt, a bare string).
    The dry run (`memtrace_opt.estimate`) and the reply lengths measured in real runs meet under this name."""
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, Mapping) for m in messages):
        return "raw"
    system, last_user = system_and_last_user([{"role": str(m.get("role")), "content": str(m.get("content") or "")}
                                              for m in messages])
    return "+".join(parse_prompt(system, last_user).output_fields) or "raw"
