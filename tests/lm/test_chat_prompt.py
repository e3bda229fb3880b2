from __future__ import annotations

from memtrace_opt.lm.chat_prompt import parse_fields, parse_instruction, parse_prompt

SYSTEM = (
    "Your input fields are:\n1. `question` (str): \n2. `context` (list[str]):\n"
    "Your output fields are:\n1. `answer` (str): the answer\n2. `n` (int):\n"
    "All interactions will be structured in the following way, with the appropriate values filled in.\n\n"
    "[[ ## question ## ]]\n{question}\n\n[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]\n"
    "In adhering to this structure, your objective is: \n        First line.\n        \n        Second line."
)
USER = (
    "[[ ## question ## ]]\nWhat?\n\nReally.\n\n[[ ## context ## ]]\n[\"x\"]\n\n"
    "Respond with the corresponding output fields, starting with the field `[[ ## answer ## ]]`, then "
    "`[[ ## n ## ]]` (must be formatted as a valid Python int), and then ending with the marker for "
    "`[[ ## completed ## ]]`."
)


def test_instruction_undoes_the_adapter_indent():
    assert parse_instruction(SYSTEM) == "First line.\n\nSecond line."
    assert parse_instruction("no objective here") == ""


def test_prompt_fields_types_and_inputs():
    parsed = parse_prompt(SYSTEM, USER)
    assert parsed.input_fields == ("question", "context")
    assert parsed.output_fields == ("answer", "n")
    assert parsed.output_types == {"answer": "str", "n": "int"}
    assert parsed.inputs == {"question": "What?\n\nReally.", "context": '["x"]'}
    assert parsed.json_output is False


def test_output_fields_fall_back_to_the_reminder_and_json_is_detected():
    user = '[[ ## q ## ]]\nhi\n\nRespond with a JSON object in the following order of fields: `a`, then `b`.'
    parsed = parse_prompt("", user)
    assert parsed.output_fields == ("a", "b")
    assert parsed.json_output is True
    assert parsed.inputs == {"q": "hi"}


def test_known_fields_keep_foreign_markers_inside_values():
    text = "[[ ## a ## ]]\nline\n[[ ## not_a_field ## ]]\nmore\n\n[[ ## b ## ]]\n2"
    assert parse_fields(text, ("a", "b")) == {"a": "line\n[[ ## not_a_field ## ]]\nmore", "b": "2"}
    assert set(parse_fields(text)) == {"a", "not_a_field", "b"}
