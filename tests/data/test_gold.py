"""The corrected gold: the QA corrections file beside a LoCoMo file, glued gold words split where the evidence
turns hold the words apart, and glued pairs (a function word glued to a word of the conversation) split where
no turn holds them apart; `load_data` reads it unless asked for the file's own gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memtrace_opt.data import (
    ABSTAIN_ANSWER,
    CORRECTIONS_FILE,
    ConversationWords,
    DataSlice,
    GoldRevision,
    load_data,
    load_dataset,
    revise_gold,
    split_glued_pairs,
    split_glued_words,
)
from memtrace_opt.errors import ConfigError, DatasetError
from tests.conftest import shared_data_path

TURNS = [
    "On weekends I like sketching herons and baking rye bread.",
    "My notes hang on a cork board above the desk, next to the bread and butter recipe.",
    "We rowed across the lake on Saturday.",
    "I paint with the 3pm light, mostly skies over Tallow Bay.",
    "I walk them to the quay on a ten min loop, past the sun porch, then some self care for her in the evening.",
]
QA: list[dict[str, Any]] = [
    {"question": "What does Ines like doing on weekends?", "answer": "sketchingherons, baking rye bread",
     "evidence": ["D1:1"], "category": 1},
    {"question": "Where do the notes hang?", "answer": "On a corkboard", "evidence": ["D1:2"], "category": 4},
    {"question": "When did they row across the lake?", "answer": "The Saturday before 6March, 2022",
     "evidence": ["D1:3"], "category": 2},
    {"question": "What does Ines do?", "answer": "Sketching,baking", "evidence": ["D1:1"], "category": 1},
    {"question": "What recipe is next to the board?", "answer": "breadandbutter", "evidence": ["D1:2"], "category": 4},
    # left alone: words the evidence writes, a word it does not write apart, a short unit, inner punctuation
    {"question": "What does Ines bake?", "answer": "rye bread", "evidence": ["D1:1"], "category": 4},
    {"question": "What is by the lake?", "answer": "a boathouse", "evidence": ["D1:3"], "category": 4},
    {"question": "When does Ines paint?", "answer": "3pm", "evidence": ["D1:4"], "category": 4},
    {"question": "What does Ines paint?", "answer": "skies over Tallow-Bay", "evidence": ["D1:4"], "category": 4},
    {"question": "What does Ines bake on Sundays?", "adversarial_answer": "ryebread", "evidence": ["D1:1"],
     "category": 5},
    {"question": "Who rowed?", "answer": "Ines and Tomas", "evidence": ["D1:3"], "category": 4},
    # glued pairs: no evidence turn writes the parts side by side (the evidence is another turn)
    {"question": "How does Tomas walk the dogs?", "answer": "walks themin a loop", "evidence": ["D1:1"],
     "category": 4},
    {"question": "Where do the dogs go?", "answer": "onwalks past the porch", "evidence": ["D1:1"], "category": 4},
    {"question": "What is past the quay?", "answer": "the sunporch", "evidence": ["D1:1"], "category": 4},
    {"question": "Who is the care for?", "answer": "herself", "evidence": ["D1:1"], "category": 4},
    {"question": "What is by the quay?", "answer": 'a kayak,"Blue Heron"', "evidence": ["D1:1"], "category": 4},
]


def _record() -> dict[str, Any]:
    turns = [{"speaker": "Ines" if i % 2 == 0 else "Tomas", "dia_id": f"D1:{i + 1}", "text": text}
             for i, text in enumerate(TURNS)]
    return {"sample_id": "demo-1", "qa": QA,
            "conversation": {"speaker_a": "Ines", "speaker_b": "Tomas",
                             "session_1_date_time": "1:00 pm on 6 March, 2022", "session_1": turns}}


def _write(folder: Path, corrections: list[dict[str, Any]] | None = None, name: str = "locomo10.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps([_record()]), encoding="utf-8")
    if corrections is not None:
        (folder / CORRECTIONS_FILE).write_text("".join(json.dumps(c) + "\n" for c in corrections), encoding="utf-8")
    return path


def _answers(path: Path, gold: str = "corrected") -> dict[str, str]:
    return {q.question_id: q.answer for _, q in load_data(str(path), DataSlice(gold=gold)).questions()}


def test_glued_words_are_split_where_the_evidence_holds_them_apart(tmp_path: Path) -> None:
    answers = _answers(_write(tmp_path))
    assert answers["demo-1:q0"] == "sketching herons, baking rye bread"
    assert answers["demo-1:q1"] == "On a cork board"  # the turn writes "cork board"
    assert answers["demo-1:q2"] == "The Saturday before 6 March, 2022"  # a number glued to a month
    assert answers["demo-1:q3"] == "Sketching, baking"  # a comma between two letters
    assert answers["demo-1:q4"] == "bread and butter"  # three adjacent words
    for index, gold in ((5, "rye bread"), (6, "a boathouse"), (7, "3pm"), (8, "skies over Tallow-Bay"),
                        (10, "Ines and Tomas")):
        assert answers[f"demo-1:q{index}"] == gold
    assert answers["demo-1:q9"] == ABSTAIN_ANSWER  # an abstention's gold is not a gold answer to split
    assert answers["demo-1:q15"] == 'a kayak, "Blue Heron"'  # a comma between a letter and a quote


def test_glued_pairs_are_split_where_both_parts_are_words_of_the_conversation(tmp_path: Path) -> None:
    answers = _answers(_write(tmp_path))
    assert answers["demo-1:q11"] == "walks them in a loop"  # the longest first part: not "the min"
    assert answers["demo-1:q12"] == "on walks past the porch"  # the conversation writes "walk": "walks" is its word
    assert answers["demo-1:q13"] == "the sunporch"  # "sun" and "porch", but no function word: a compound
    assert answers["demo-1:q14"] == "herself"  # "her" and "self", but an English word
    assert _answers(_write(tmp_path), "upstream")["demo-1:q11"] == "walks themin a loop"


def test_the_upstream_gold_is_the_file_as_published(tmp_path: Path) -> None:
    path = _write(tmp_path)
    assert _answers(path, "upstream") == {q.question_id: q.answer for _, q in load_dataset(path).questions()}
    revision = load_data(str(path), DataSlice(gold="upstream")).gold_revision
    assert revision == GoldRevision("upstream")


def test_the_revision_counts_what_each_rule_changed(tmp_path: Path) -> None:
    dataset = load_data(str(_write(tmp_path)))
    revision = dataset.gold_revision
    assert revision is not None and revision.gold == "corrected" and revision.corrections is None
    assert revision.changed["glued_words"] == (*(f"demo-1:q{i}" for i in range(5)), "demo-1:q15")
    assert revision.changed["glued_pairs"] == ("demo-1:q11", "demo-1:q12")
    assert revision.counts(["demo-1:q0", "demo-1:q5", "demo-1:q12"]) == {"qa_corrections": 0, "glued_words": 1,
                                                                         "glued_pairs": 1}
    assert dataset.gold_summary() == {"gold": "corrected", "corrections": None,
                                      "changed": {"qa_corrections": 0, "glued_words": 6, "glued_pairs": 2}}
    assert revision.by_split({"train": ["demo-1:q1"], "test": []}) == {
        "gold": "corrected", "corrections": None, "train": {"qa_corrections": 0, "glued_words": 1, "glued_pairs": 0},
        "test": {"qa_corrections": 0, "glued_words": 0, "glued_pairs": 0}}
    assert GoldRevision.from_dict(json.loads(json.dumps(revision.to_dict()))) == revision


def _change(index: int, corrected: dict[str, Any] | None, upstream: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"sample_id": "demo-1", "qa_index": index, "upstream": upstream or QA[index], "pr28": corrected}


def test_corrections_beside_the_file_replace_or_remove_questions(tmp_path: Path) -> None:
    fixed = {"question": "Where do the notes hang?", "answer": "Above the desk", "evidence": ["D1:2"], "category": 4}
    trap = {"question": "What does Ines row?", "adversarial_answer": "a canoe", "evidence": ["D1:3"], "category": 5}
    stale = {**QA[6], "answer": "a shed"}  # written against another revision of the file: left alone
    path = _write(tmp_path, [_change(1, fixed), _change(5, trap), _change(7, None), _change(6, {**QA[6], "answer": "x"},
                                                                                             upstream=stale)])
    dataset = load_data(str(path))
    questions = {q.question_id: q for _, q in dataset.questions()}
    assert questions["demo-1:q1"].answer == "Above the desk"
    assert questions["demo-1:q5"].abstention and questions["demo-1:q5"].adversarial_answer == "a canoe"
    assert questions["demo-1:q5"].category == "adversarial"
    assert "demo-1:q7" not in questions  # removed; the other ids stay those of the file
    assert questions["demo-1:q6"].answer == "a boathouse"
    revision = dataset.gold_revision
    assert revision is not None and revision.corrections == CORRECTIONS_FILE
    assert revision.changed["qa_corrections"] == ("demo-1:q1", "demo-1:q5") and revision.removed == ("demo-1:q7",)
    # the corrections come first: the slice reads the corrected category
    kept = load_data(str(path), DataSlice(categories=("adversarial",)))
    assert [q.question_id for _, q in kept.questions()] == ["demo-1:q5", "demo-1:q9"]
    assert "demo-1:q7" in _answers(path, "upstream")


def test_a_corrected_gold_can_still_be_glued(tmp_path: Path) -> None:
    glued = {**QA[1], "answer": "a corkboard above the desk"}
    path = _write(tmp_path, [_change(1, glued)])
    revision = load_data(str(path)).gold_revision
    assert _answers(path)["demo-1:q1"] == "a cork board above the desk"
    assert revision is not None and "demo-1:q1" in revision.changed["qa_corrections"]
    assert "demo-1:q1" in revision.changed["glued_words"]


def test_a_malformed_corrections_line_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path)
    (tmp_path / CORRECTIONS_FILE).write_text('{"sample_id": "demo-1"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=f"{CORRECTIONS_FILE}: line 1: not a QA correction"):
        load_data(str(path))


def test_a_corrected_record_the_loader_cannot_read_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, [_change(1, {"question": "Where?", "evidence": [], "category": 4})])
    with pytest.raises(DatasetError, match=f"{CORRECTIONS_FILE}: demo-1: qa 1 is missing 'answer'"):
        load_data(str(path))


def test_an_unknown_gold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bad gold 'fixed'"):
        DataSlice(gold="fixed")
    with pytest.raises(DatasetError, match="unknown gold"):
        revise_gold(load_dataset(_write(tmp_path)), "fixed")


def test_a_slice_recorded_before_the_choice_reads_the_upstream_gold() -> None:
    assert DataSlice.from_dict({"sample_ids": None, "sessions": None, "categories": None, "limit": None,
                                "seed": 0}).gold == "upstream"
    assert DataSlice().gold == "corrected" and DataSlice().to_dict()["gold"] == "corrected"
    assert DataSlice(gold="upstream").describe() == "gold=upstream"


def test_split_glued_words_on_one_question(tmp_path: Path) -> None:
    (conversation,) = load_dataset(_write(tmp_path)).conversations
    question = conversation.questions[0]
    assert split_glued_words(conversation, question).answer == "sketching herons, baking rye bread"
    assert split_glued_words(conversation, conversation.questions[5]) is conversation.questions[5]
    assert split_glued_pairs(conversation, conversation.questions[11]).answer == "walks them in a loop"
    assert split_glued_pairs(conversation, conversation.questions[13]) is conversation.questions[13]


def test_the_corrections_and_glued_words_of_locomo() -> None:
    """The real LoCoMo file and its corrections file: how many gold answers each rule changes."""
    path = shared_data_path("locomo", "locomo10.json")
    shared_data_path("locomo", CORRECTIONS_FILE)
    upstream = load_data(str(path), DataSlice(gold="upstream"))
    corrected = load_data(str(path))
    revision = corrected.gold_revision
    assert revision is not None and revision.corrections == CORRECTIONS_FILE
    assert upstream.stats().questions == 1986 and corrected.stats().questions == 1985
    assert revision.counts() == {"qa_corrections": 219, "glued_words": 33, "glued_pairs": 5}
    assert len(revision.removed) == 1
    before = {q.question_id: q for _, q in upstream.questions()}
    after = {q.question_id: q for _, q in corrected.questions()}
    changed = {qid for qid in after if after[qid] != before[qid]}
    glued = set(revision.changed["glued_words"]) | set(revision.changed["glued_pairs"])
    assert changed == set(revision.changed["qa_corrections"]) | glued
    # every glued-word change only inserts spaces: the gold's characters are the file's
    for qid in glued - set(revision.changed["qa_corrections"]):
        assert after[qid].answer.replace(" ", "") == before[qid].answer.replace(" ", "")
    # and no gold word of the scored questions is left that the conversation never writes apart, if its parts are
    for conversation in corrected.conversations:
        words = ConversationWords.of(conversation)
        for question in conversation.questions:
            assert split_glued_pairs(conversation, question, words) is question
