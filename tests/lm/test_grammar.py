"""The reply grammar of a ChatAdapter prompt, built from its output fields' types."""

from __future__ import annotations

from typing import Any, Literal

import dspy
from required import need_module

from memtrace_opt.lm.grammar import GrammarBounds, reply_format, reply_grammar


class Mixed(dspy.Signature):
    """Answer."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()
    sure: bool = dspy.OutputField()
    half: Literal["first", "second"] = dspy.OutputField()
    count: int = dspy.OutputField()
    facts: list[str] = dspy.OutputField()


class Actions(dspy.Signature):
    """Decide."""

    facts: str = dspy.InputField()
    memory_actions: list[dict[str, Any]] = dspy.OutputField()


def _prompt(signature: type[dspy.Signature], adapter: Any = None) -> tuple[str, str]:
    messages = (adapter or dspy.ChatAdapter()).format(signature, demos=[], inputs={k: "x" for k in signature.input_fields})
    return messages[0]["content"], messages[-1]["content"]


def test_each_output_type_gets_its_kind_in_field_order():
    found = reply_format(*_prompt(Mixed))
    assert found is not None
    assert found.fields == ("answer", "sure", "half", "count", "facts")
    answer, sure, half, count, facts = found.kinds
    assert answer == "text"
    assert sure == ("one_of", ["true", "false", "True", "False"])
    assert half == ("one_of", ["first", "second"])
    assert count == {"type": "integer"}
    assert facts == {"type": "array", "items": {"type": "string"}}
    assert found.last_is_list and found.list_fields == frozenset({"facts"})


def test_the_grammar_spells_the_adapters_markers_and_bounds_lists():
    need_module("llama_cpp", "pip install -e '.[local]'")
    text = reply_grammar(*_prompt(Mixed), GrammarBounds(max_items=3))
    assert text is not None
    root = text.splitlines()[0]
    assert root.startswith('root ::= "[[ ## answer ## ]]\\n" free-text field-gap "[[ ## sure ## ]]\\n"')
    assert root.endswith('field-gap "[[ ## completed ## ]]"')
    assert 'field-gap ::= [ \\t]* "\\n" "\\n"?' in text  # one newline or the adapter's two before a marker
    assert '("first" | "second")' in root
    lists = next(line for line in text.splitlines() if line.startswith("field-4 ::="))
    assert lists.count("string") == 3  # at most three items


def test_objects_of_any_values_are_held_to_scalar_values():
    need_module("llama_cpp", "pip install -e '.[local]'")
    text = reply_grammar(*_prompt(Actions))
    assert text is not None
    assert "string | number | boolean | null" in text


def test_other_prompt_layouts_get_no_grammar():
    assert reply_format(*_prompt(Mixed, dspy.JSONAdapter())) is None
    assert reply_format("You are a helpful assistant.", "What is 2+2?") is None
