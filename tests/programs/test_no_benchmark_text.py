"""No benchmark text in what the program ships: the prompts of the built-in memory systems (every named
predictor's instruction, field descriptions and prefixes, demos), the optimizer's reflection prompt and the rules
it appends by diagnosis, and the attributor's and judge's prompts share no run of six words with LoCoMo (turns,
questions, answers) or LongMemEval (questions, answers), and hold none of their questions or gold answers of three
words or more. A prompt's worked example is invented (DESIGN.md), never a benchmark's turn or gold answer.

The benchmark files are read from ../shared/data: skipped where it is absent, a failure in CI.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
import pytest

from memtrace_opt.programs import BUILTIN_SYSTEMS, make_program

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
RUN_WORDS = 6  # a run of this many words in common is copied text, not a shared turn of phrase
PHRASE_WORDS = 3  # a question or gold answer at least this long found whole is copied too
_PUNCT = re.compile(r"[^\w\s]")


def words(text: str) -> list[str]:
    """Lower-cased words, punctuation stripped ("Mem0's e.g." -> ["mem0s", "eg"])."""
    return _PUNCT.sub("", text.lower()).split()


@dataclass(frozen=True)
class BenchmarkText:
    """Every RUN_WORDS-word run of a benchmark's texts, and its questions and answers as normalized phrases."""

    runs: frozenset[str]
    phrases: frozenset[str]

    @classmethod
    def of(cls, texts: Iterable[str], phrases: Iterable[str]) -> BenchmarkText:
        runs: set[str] = set()
        for text in texts:
            tokens = words(text)
            runs.update(" ".join(tokens[i:i + RUN_WORDS]) for i in range(len(tokens) - RUN_WORDS + 1))
        normalized = (" ".join(words(p)) for p in phrases)
        return cls(frozenset(runs), frozenset(p for p in normalized if len(p.split()) >= PHRASE_WORDS))

    def found_in(self, text: str) -> list[str]:
        """The benchmark runs and phrases `text` holds (empty when none)."""
        tokens = words(text)
        runs = [" ".join(tokens[i:i + RUN_WORDS]) for i in range(len(tokens) - RUN_WORDS + 1)]
        hits = list(dict.fromkeys(run for run in runs if run in self.runs))
        padded = f" {' '.join(tokens)} "
        return hits + sorted(p for p in self.phrases if f" {p} " in padded)


def _data_file(*parts: str) -> Path:
    """A file under ../shared/data; skips where absent, except in CI where it must exist (tests/conftest.py)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing in CI: the benchmark data must be beside the checkout")
        pytest.skip(f"{path} is absent (the LoCoMo/LongMemEval files are not shipped with the package)")
    return path


def _locomo(path: Path) -> tuple[list[str], list[str]]:
    texts, phrases = [], []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts += [str(turn.get(field) or "") for turn in session for field in ("text", "blip_caption")]
        for qa in sample["qa"]:
            answer = qa.get("answer", qa.get("adversarial_answer"))
            phrases += [str(qa["question"]), str(answer if answer is not None else "")]
    return texts, phrases


def _longmemeval(path: Path) -> list[str]:
    return [str(item[field]) for item in json.loads(path.read_text(encoding="utf-8")) for field in ("question", "answer")]


@pytest.fixture(scope="session")
def benchmark_text() -> BenchmarkText:
    texts, phrases = _locomo(_data_file("locomo", "locomo10.json"))
    phrases += _longmemeval(_data_file("longmemeval", "longmemeval_oracle.json"))
    return BenchmarkText.of([*texts, *phrases], phrases)


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


# the shipped prompts -------------------------------------------------------------------------------------
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
