"""No benchmark text in what the program ships: the prompts of the built-in memory systems (every named
predictor's instruction, field descriptions and prefixes, demos), the optimizer's reflection prompt and the rules
it appends by diagnosis, the attributor's and judge's prompts, the speed probe's prompt, and every docstring,
comment and string of the package's sources share no run of six words with LoCoMo (turns, questions, answers) or
LongMemEval (session turns, questions, answers), and hold none of their questions or gold answers of three words
or more. A prompt's worked example, a docstring's or a comment's, is invented (DESIGN.md), never a benchmark's
turn, question or answer.

The benchmark files are read from ../shared/data: skipped where it is absent, a failure in CI.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import dspy
import pytest

from memtrace_opt.programs import BUILTIN_SYSTEMS, make_program
from memtrace_opt.text.words import FUNCTION_WORDS
from tests.sources import ROOT, docstring_ids, package_sources

SHARED_DATA = ROOT.parent / "shared" / "data"
RUN_WORDS = 6  # a run of this many words in common is copied text, not a shared turn of phrase
PHRASE_WORDS = 3  # a question or gold answer at least this long found whole is copied too
RETOLD_WORDS = 6  # a question this long found whole with its names changed is retold
_PUNCT = re.compile(r"[^\w\s]")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:'s)?")
NAME = "x"  # what a masked name reads as


def words(text: str) -> list[str]:
    """Lower-cased words, punctuation stripped ("Mem0's e.g." -> ["mem0s", "eg"])."""
    return _PUNCT.sub("", text.lower()).split()


def masked(text: str) -> list[str]:
    """`words` with every capitalised word but a function word read as one name ("When did Odalys's kayak sink?"
    -> ["when", "did", "x", "kayak", "sink"])."""
    return words(_CAPITALISED.sub(lambda m: m.group() if m.group().lower() in FUNCTION_WORDS else NAME, text))


def _runs(tokens: list[str]) -> list[str]:
    return [" ".join(tokens[i:i + RUN_WORDS]) for i in range(len(tokens) - RUN_WORDS + 1)]


def _by_first_word(phrases: Iterable[str]) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for phrase in phrases:
        found.setdefault(phrase.split(" ", 1)[0], set()).add(phrase)
    return {word: frozenset(them) for word, them in found.items()}


def _whole(index: dict[str, frozenset[str]], tokens: list[str]) -> set[str]:
    """The phrases of `index` that `tokens` hold whole."""
    return {phrase for i, token in enumerate(tokens) for phrase in index.get(token, ())
            if " ".join(tokens[i:i + phrase.count(" ") + 1]) == phrase}


@dataclass(frozen=True)
class BenchmarkText:
    """Every RUN_WORDS-word run of a benchmark's texts (kept as hashes: LongMemEval's sessions hold about two
    million), its questions and answers as normalized phrases, and its questions with their names masked (a
    question retold under another name)."""

    runs: frozenset[int]
    phrases: frozenset[str]
    retold: frozenset[str] = frozenset()

    @classmethod
    def of(cls, texts: Iterable[str], phrases: Iterable[str], questions: Iterable[str] = ()) -> BenchmarkText:
        runs: set[int] = set()
        for text in texts:
            runs.update(map(hash, _runs(words(text))))
        normalized = (" ".join(words(p)) for p in phrases)
        retold = (masked(q) for q in questions)
        return cls(frozenset(runs), frozenset(p for p in normalized if len(p.split()) >= PHRASE_WORDS),
                   frozenset(" ".join(q) for q in retold if len(q) >= RETOLD_WORDS and NAME in q))

    @cached_property
    def _phrase_index(self) -> dict[str, frozenset[str]]:
        return _by_first_word(self.phrases)

    @cached_property
    def _retold_index(self) -> dict[str, frozenset[str]]:
        return _by_first_word(self.retold)

    def found_in(self, text: str) -> list[str]:
        """The benchmark runs, phrases and retold questions `text` holds (empty when none)."""
        tokens = words(text)
        hits = list(dict.fromkeys(run for run in _runs(tokens) if hash(run) in self.runs))
        retold = [f"retold: {q}" for q in sorted(_whole(self._retold_index, masked(text)))]
        return hits + sorted(_whole(self._phrase_index, tokens)) + retold


def _data_file(*parts: str) -> Path:
    """A file under ../shared/data; skips where absent, except in CI where it must exist (tests/conftest.py)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing in CI: the benchmark data must be beside the checkout")
        pytest.skip(f"{path} is absent (the LoCoMo/LongMemEval files are not shipped with the package)")
    return path


class Dataset(NamedTuple):
    """A benchmark's texts: its conversations' turns, its questions and its gold answers."""

    turns: list[str]
    questions: list[str]
    answers: list[str]


def _locomo(path: Path) -> Dataset:
    turns, questions, answers = [], [], []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [str(turn.get(field) or "") for turn in session for field in ("text", "blip_caption")]
        for qa in sample["qa"]:
            answer = qa.get("answer", qa.get("adversarial_answer"))
            questions.append(str(qa["question"]))
            answers.append(str(answer if answer is not None else ""))
    return Dataset(turns, questions, answers)


def _longmemeval(path: Path) -> Dataset:
    items = json.loads(path.read_text(encoding="utf-8"))
    turns = {str(turn.get("content") or ""): None for item in items for session in item["haystack_sessions"]
             for turn in session}
    return Dataset(list(turns), [str(item["question"]) for item in items], [str(item["answer"]) for item in items])


@pytest.fixture(scope="module")  # its runs take about 150 MB: freed once this module's tests are done
def benchmark_text() -> BenchmarkText:
    datasets = [_locomo(_data_file("locomo", "locomo10.json")),
                _longmemeval(_data_file("longmemeval", "longmemeval_oracle.json"))]
    questions = [q for d in datasets for q in d.questions]
    phrases = [*questions, *(a for d in datasets for a in d.answers)]
    return BenchmarkText.of([*(t for d in datasets for t in d.turns), *phrases], phrases, questions)


# what is shipped ----------------------------------------------------------------------------------------
def signature_texts(where: str, signature: type[dspy.Signature]) -> Iterator[tuple[str, str]]:
    """(where, text) for a Signature's instruction and each field's description and prefix."""
    yield f"{where} instructions", signature.instructions
    for name, field in signature.fields.items():
        extra = field.json_schema_extra or {}
        for part in ("desc", "prefix"):
            yield f"{where} {name}.{part}", str(extra.get(part) or "")


def predictor_texts(where: str, predictor: Any) -> Iterator[tuple[str, str]]:
    """A predictor's Signature texts and every value of its demos."""
    yield from signature_texts(where, predictor.signature)
    for i, demo in enumerate(predictor.demos):
        values = demo.toDict() if hasattr(demo, "toDict") else dict(demo)
        for key, value in values.items():
            yield f"{where} demos[{i}].{key}", str(value)


def program_texts(system: str) -> list[tuple[str, str]]:
    program = make_program(system)
    return [item for name, predictor in program.named_predictors() for item in predictor_texts(f"{system}:{name}", predictor)]


def optimizer_prompt_texts() -> list[tuple[str, str]]:
    """The reflection LM's prompt: its two Signatures and the approaches it is given."""
    from memtrace_opt.optimizers.sources.reflective import APPROACHES, ProposeInstruction, ProposeRule

    texts = [*signature_texts("ProposeInstruction", ProposeInstruction), *signature_texts("ProposeRule", ProposeRule)]
    return texts + [(f"APPROACHES[{i}]", approach) for i, approach in enumerate(APPROACHES)]


def diagnosis_rule_texts() -> list[tuple[str, str]]:
    """What the optimizer appends to an instruction by rule (each diagnosed pattern's rule), and the mistake it
    tells the reflection LM."""
    from memtrace_opt.optimizers.evaluation.diagnosis import PATTERNS

    return [(f"PATTERNS[{p.name}].{part}", getattr(p, part)) for p in PATTERNS for part in ("rule", "mistake")]


def attribution_prompt_texts() -> list[tuple[str, str]]:
    """The attributor's Signatures and the answer judge's."""
    from memtrace_opt.attribution import signatures
    from memtrace_opt.metrics import JudgeAnswer

    found = [getattr(signatures, name) for name in signatures.__all__]
    classes = [cls for cls in found if isinstance(cls, type) and issubclass(cls, dspy.Signature)]
    return [item for cls in [*classes, JudgeAnswer] for item in signature_texts(cls.__name__, cls)]


def speed_probe_texts() -> list[tuple[str, str]]:
    """The prompt that measures the model's speed (`estimate`), as the model reads it."""
    from memtrace_opt.estimate._rates import _measure_prompt

    return [(f"speed probe messages[{i}]", str(m["content"])) for i, m in enumerate(_measure_prompt(280))]


def source_texts(source: str, where: str) -> Iterator[tuple[str, str]]:
    """(where, text) for every docstring, other string and comment of a Python source."""
    tree = ast.parse(source)
    docstrings = docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            kind = "docstring" if id(node) in docstrings else "string"
            yield f"{where}:{node.lineno} {kind}", node.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield f"{where}:{token.start[0]} comment", token.string


def package_source_texts() -> list[tuple[str, str]]:
    return [item for path in package_sources()
            for item in source_texts(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]


def copied(benchmark: BenchmarkText, texts: Iterable[tuple[str, str]]) -> list[str]:
    return [f"{where}: {hit!r}" for where, text in texts for hit in benchmark.found_in(text)]


# the matcher ---------------------------------------------------------------------------------------------
def test_the_matcher_finds_a_planted_six_word_run_and_ignores_a_five_word_one() -> None:
    bench = BenchmarkText.of(["Odalys carried the red kayak down to the quay at dawn."], ["Teodor's wooden fox", "Two kids"])
    assert bench.found_in("Rules: ODALYS carried the red-kayak down, ... then stop.") == []  # "redkayak" is one word
    assert bench.found_in("Example: the red kayak down to the quay.") == ["the red kayak down to the",
                                                                          "red kayak down to the quay"]
    assert bench.found_in("Example: kayak down to the quay, or not.") == []  # five words in common
    assert bench.found_in("A reply such as 'Teodor's wooden fox!'") == ["teodors wooden fox"]  # a gold answer, whole
    assert bench.found_in("the wooden foxes") == [] and bench.found_in("He has two kids.") == []  # a part; 2 words


def test_the_matcher_finds_a_question_retold_under_another_name() -> None:
    bench = BenchmarkText.of([], [], ["When did Teodor's uncle sell the boathouse?", "What did Ines bake?"])
    assert bench.found_in('A fact for "When did Marek\'s uncle sell the boathouse?" is ...') == [
        "retold: when did x uncle sell the boathouse"]
    assert bench.found_in("When did the uncle sell the boathouse?") == []  # no name: a phrase of its own
    assert bench.found_in("What did Odalys bake?") == []  # shorter than RETOLD_WORDS: too common to count


# the shipped prompts -------------------------------------------------------------------------------------
def test_docstrings_comments_and_strings_of_a_source_are_read() -> None:
    source = '''"""Module doc: the red kayak down to the quay."""
X = "a string"  # a comment
def f():
    """Function doc."""
'''
    texts = list(source_texts(source, "m.py"))
    assert ("m.py:1 docstring", "Module doc: the red kayak down to the quay.") in texts
    assert ("m.py:2 string", "a string") in texts and ("m.py:2 comment", "# a comment") in texts
    assert ("m.py:4 docstring", "Function doc.") in texts
    bench = BenchmarkText.of(["Odalys carried the red kayak down to the quay at dawn."], [])
    assert copied(bench, texts) == ["m.py:1 docstring: 'the red kayak down to the'",
                                    "m.py:1 docstring: 'red kayak down to the quay'"]


def test_every_named_predictor_of_the_built_in_systems_is_read() -> None:
    for system in BUILTIN_SYSTEMS:
        program = make_program(system)
        texts = dict(program_texts(system))
        for name, predictor in program.named_predictors():
            assert texts[f"{system}:{name} instructions"] == predictor.signature.instructions
            assert all(f"{system}:{name} {field}.desc" in texts for field in predictor.signature.fields)
    assert dict(diagnosis_rule_texts()) and dict(optimizer_prompt_texts()) and dict(attribution_prompt_texts())


def test_a_planted_benchmark_question_in_an_instruction_is_caught(benchmark_text: BenchmarkText) -> None:
    question = next(p for p in sorted(benchmark_text.phrases) if len(p.split()) >= 8)
    program = make_program("mem0")
    predictor = dict(program.named_predictors())["answer.predict"]
    predictor.signature = predictor.signature.with_instructions(f"Answer briefly, e.g. to {question.upper()}?")
    assert copied(benchmark_text, predictor_texts("mem0:answer.predict", predictor))


@pytest.mark.parametrize("system", BUILTIN_SYSTEMS)
def test_built_in_prompts_share_no_text_with_the_benchmarks(system: str, benchmark_text: BenchmarkText) -> None:
    assert copied(benchmark_text, program_texts(system)) == []


def test_the_reflection_prompt_shares_no_text_with_the_benchmarks(benchmark_text: BenchmarkText) -> None:
    assert copied(benchmark_text, optimizer_prompt_texts()) == []


def test_the_rules_the_optimizer_appends_share_no_text_with_the_benchmarks(benchmark_text: BenchmarkText) -> None:
    assert copied(benchmark_text, diagnosis_rule_texts()) == []


def test_the_attributor_and_judge_prompts_share_no_text_with_the_benchmarks(benchmark_text: BenchmarkText) -> None:
    assert copied(benchmark_text, attribution_prompt_texts()) == []


def test_the_speed_probe_prompt_shares_no_text_with_the_benchmarks(benchmark_text: BenchmarkText) -> None:
    texts = speed_probe_texts()
    assert len(texts) == 2 and sum(len(words(text)) for _, text in texts) > 250
    assert copied(benchmark_text, texts) == []


def test_longmemeval_session_text_is_read(benchmark_text: BenchmarkText) -> None:
    sessions = _longmemeval(_data_file("longmemeval", "longmemeval_oracle.json")).turns
    turn = next(text for text in sessions if len(words(text)) >= 40)
    assert benchmark_text.found_in(f"Example: {turn[:400]}")


def test_the_package_sources_share_no_text_with_the_benchmarks(benchmark_text: BenchmarkText) -> None:
    """Every docstring, comment and string of the sources the package installs: an example there is invented."""
    texts = package_source_texts()
    assert len(texts) > 10_000 and any(where.startswith("memtrace_opt/attribution/_evidence.py") for where, _ in texts)
    assert copied(benchmark_text, texts) == []
