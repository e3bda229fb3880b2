"""A GBNF grammar for the reply a DSPy ChatAdapter prompt asks for, built from its output fields' types.

The ChatAdapter's system message lists the output fields with their types and, in its structure section, a note
per typed field ("must be True or False", "must exactly match (no extra characters) one of: a; b", "must be a
single int value", "must adhere to the JSON schema: {...}"). The reply it parses is

    [[ ## field_1 ## ]]
    value_1

    [[ ## field_2 ## ]]
    value_2

    [[ ## completed ## ]]

`reply_grammar` turns that into a grammar llama.cpp decodes under: every reply then parses, and stops at the
completed marker instead of running to the token limit. Lists carry a bound on their length (`max_items`) and
strings inside JSON values a bound on theirs (`max_chars`), so a model that starts repeating one item cannot loop
for ever inside a value. A plain `str` field is free text that never opens a `[[` marker. Prompts of another
layout (a JSONAdapter prompt, a hand-written one) get no grammar: `None`, and the call decodes unconstrained.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from memtrace_opt.lm.chat_prompt import parse_prompt

__all__ = ["GrammarBounds", "ReplyFormat", "field_schemas", "reply_format", "reply_grammar"]

_NOTE = re.compile(r"^\[\[ ## (\w+) ## \]\]\n\{\1\}[ \t]+# note: the value you produce (.+)$", re.MULTILINE)
_SCHEMA_NOTE = "must adhere to the JSON schema: "
_ONE_OF_NOTE = "must exactly match (no extra characters) one of: "
_STRUCTURE_START = "All interactions will be structured in the following way"
_STRUCTURE_END = "In adhering to this structure, your objective is:"
_FREE_TEXT = 'free-text ::= ([^[] | "[" [^[])*'
# Between a value and the next marker: one or two newlines (the adapter writes two; a model that writes one must
# not be forced to keep writing text until it can).
_FIELD_GAP = 'field-gap ::= [ \\t]* "\\n" "\\n"?'


@dataclass(frozen=True)
class GrammarBounds:
    """How long a constrained value may grow: items per JSON list, characters per JSON string."""

    max_items: int = 24
    max_chars: int = 0  # 0: unbounded (a bound expands into one nested rule per character)


def _bounded(schema: Any, bounds: GrammarBounds) -> Any:
    """`schema` with `maxItems` on every array and `maxLength` on every string that lacks one."""
    if isinstance(schema, list):
        return [_bounded(item, bounds) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _bounded(value, bounds) for key, value in schema.items()}
    kind = out.get("type")
    if kind == "array" and "maxItems" not in out:
        out["maxItems"] = bounds.max_items
    if kind == "string" and bounds.max_chars and "maxLength" not in out and "enum" not in out and "pattern" not in out:
        out["maxLength"] = bounds.max_chars
    if kind == "object" and out.get("additionalProperties") is True:
        out["additionalProperties"] = {"type": ["string", "number", "boolean", "null"]}
    return out


def field_schemas(system: str, output_fields: tuple[str, ...]) -> dict[str, Any] | None:
    """Field -> a JSON schema, "text" (free text) or ("one_of", options); None if a note cannot be read."""
    structure = system.partition(_STRUCTURE_START)[2].partition(_STRUCTURE_END)[0]
    if not structure:
        return None
    notes = {m.group(1): m.group(2).strip() for m in _NOTE.finditer(structure)}
    kinds: dict[str, Any] = {}
    for name in output_fields:
        note = notes.get(name)
        if note is None:
            kinds[name] = "text"
        elif note == "must be True or False":
            kinds[name] = ("one_of", ["true", "false", "True", "False"])
        elif note.startswith(_ONE_OF_NOTE):
            kinds[name] = ("one_of", [option for option in note[len(_ONE_OF_NOTE):].split("; ") if option])
        elif note == "must be a single int value":
            kinds[name] = {"type": "integer"}
        elif note == "must be a single float value":
            kinds[name] = {"type": "number"}
        elif note.startswith(_SCHEMA_NOTE):
            try:
                kinds[name] = json.loads(note[len(_SCHEMA_NOTE):])
            except json.JSONDecodeError:
                return None
        else:
            return None
    return kinds


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _is_list(kind: Any) -> bool:
    return isinstance(kind, dict) and kind.get("type") == "array"


@dataclass(frozen=True)
class ReplyFormat:
    """The output fields a ChatAdapter prompt asks for, in order, each with its kind (see `field_schemas`)."""

    fields: tuple[str, ...]
    kinds: tuple[Any, ...]

    @property
    def last_is_list(self) -> bool:
        return bool(self.kinds) and _is_list(self.kinds[-1])

    @property
    def list_fields(self) -> frozenset[str]:
        return frozenset(name for name, kind in zip(self.fields, self.kinds, strict=True) if _is_list(kind))

    def gbnf(self, bounds: GrammarBounds | None = None) -> str:
        """The grammar of the whole reply, from the first field's marker to the completed marker."""
        from llama_cpp.llama_grammar import SchemaConverter

        bounds = bounds or GrammarBounds()
        converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        parts: list[str] = []
        free_text = False
        for index, (name, kind) in enumerate(zip(self.fields, self.kinds, strict=True)):
            head = f"[[ ## {name} ## ]]\n"
            if kind == "text":
                free_text = True
                rule = "free-text"
            elif isinstance(kind, tuple):
                rule = "(" + " | ".join(_literal(option) for option in kind[1]) + ")"
            else:
                schema = converter.resolve_refs(_bounded(kind, bounds), "field")
                rule = converter.visit(schema, f"field-{index}")
            parts.append(f"{'' if index == 0 else 'field-gap '}{_literal(head)} {rule}")
        parts.append(f"field-gap {_literal('[[ ## completed ## ]]')}")
        lines = [f"root ::= {' '.join(parts)}", _FIELD_GAP, converter.format_grammar()]
        if free_text:
            lines.append(_FREE_TEXT)
        return "\n".join(line for line in lines if line)


def reply_format(system: str, last_user: str) -> ReplyFormat | None:
    """The reply format of a ChatAdapter prompt, or None for any other layout (JSONAdapter, hand-written)."""
    parsed = parse_prompt(system, last_user)
    if parsed.json_output or not parsed.output_fields:
        return None
    kinds = field_schemas(system, parsed.output_fields)
    if kinds is None:
        return None
    return ReplyFormat(parsed.output_fields, tuple(kinds[name] for name in parsed.output_fields))


def reply_grammar(system: str, last_user: str, bounds: GrammarBounds | None = None) -> str | None:
    """The GBNF grammar of the reply this ChatAdapter prompt asks for, or None for any other layout."""
    found = reply_format(system, last_user)
    return None if found is None else found.gbnf(bounds)
