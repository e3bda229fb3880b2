"""Splits that cannot overlap: a conversation in one split only, unless the data has too few of them (which the
record then says), and a record that tells two splits apart."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from toydata import toy_conversation

from memtrace_opt.data import Conversation, Dataset
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.evaluation.splits import SPLIT_NAMES, SplitMode, make_splits, same_splits


def dataset(*sizes: int) -> Dataset:
    """Conversations c0, c1, ... holding the first `size` of the toy conversation's nine questions each, each with
    turns of its own (the same turns in two conversations would join them in one unit)."""
    conversations = []
    for index, size in enumerate(sizes):
        conversation = distinct(toy_conversation(f"c{index}"))
        conversations.append(replace(conversation, questions=conversation.questions[:size]))
    return Dataset("toy", "toy.json", tuple(conversations))


def distinct(conversation: Conversation) -> Conversation:
    """`conversation` with its id in every turn's text."""
    return replace(conversation, sessions=tuple(
        replace(s, turns=tuple(replace(t, text=f"{t.text} ({conversation.sample_id})") for t in s.turns))
        for s in conversation.sessions))


def conversations(splits) -> dict[str, list[str]]:
    return {name: [c.sample_id for c in getattr(splits, name)] for name in SPLIT_NAMES}


def question_ids(splits) -> dict[str, set[str]]:
    return {name: {q.question_id for c in getattr(splits, name) for q in c.questions} for name in SPLIT_NAMES}


@pytest.mark.parametrize(("flags", "message"), [
    ({"train": "c0,c1", "val": "c1", "test": "c2"}, "'c1' is named by --train and --val"),
    ({"train": "c0", "val": "c1", "test": "c2,c0"}, "'c0' is named by --train and --test"),
    ({"train": "c0", "val": "c2", "test": "c2"}, "'c2' is named by --val and --test"),
    ({"train": "c0", "test": "c0"}, "'c0' is named by --train and --test"),
])
def test_a_conversation_named_by_two_splits_is_a_usage_error_naming_it(flags, message):
    with pytest.raises(ConfigError, match=message) as error:
        make_splits(dataset(9, 9, 9), **flags)
    assert "\n" not in str(error.value)  # one line


def test_a_conversation_repeated_in_one_flag_counts_once():
    splits = make_splits(dataset(9, 9, 9), train="c0,c0", val="c1", test="c2")
    assert conversations(splits) == {"train": ["c0"], "val": ["c1"], "test": ["c2"]}
    assert splits.sizes() == {"train": 9, "val": 9, "test": 9} and splits.note is None


def test_without_val_validation_is_drawn_from_the_other_conversations(caplog):
    data = dataset(9, 9, 9, 9, 9, 9)
    with caplog.at_level(logging.WARNING):
        splits = make_splits(data, train="c0,c1", test="c2", seed=4)
    named = conversations(splits)
    assert len(named["val"]) == 2 and set(named["val"]) <= {"c3", "c4", "c5"}  # as many as --train names
    assert splits.mode == SplitMode.NAMED and splits.shared_conversations() == {}
    assert splits.note is not None and splits.note.startswith(f"--val not given: validating on {', '.join(named['val'])}")
    assert [r.getMessage() for r in caplog.records] == [splits.note]  # said in one line
    again = make_splits(data, train="c0,c1", test="c2", seed=4)
    assert conversations(again) == named  # the seed decides
    drawn = {tuple(conversations(make_splits(data, train="c0,c1", test="c2", seed=s))["val"]) for s in range(8)}
    assert len(drawn) > 1


def test_without_val_and_no_conversation_left_train_and_val_split_trains_questions():
    splits = make_splits(dataset(9, 9), train="c0", test="c1")
    ids = question_ids(splits)
    assert splits.mode == SplitMode.TRAIN_VAL_SHARED and conversations(splits)["test"] == ["c1"]
    assert not ids["train"] & ids["val"] and len(ids["train"] | ids["val"]) == 9 and len(ids["test"]) == 9
    assert splits.shared_conversations() == {"c0": ["train", "val"]}  # never the test's
    assert splits.note is not None and "no conversation is left" in splits.note
    assert splits.to_dict()["shared_conversations"] == {"c0": ["train", "val"]}


def test_fractions_give_each_conversation_to_one_split_with_counts_near_the_shares():
    data = dataset(9, 2, 5, 7, 3, 4, 6)  # 36 questions: the shares 0.5, 0.25, 0.25 are 18, 9 and 9
    splits = make_splits(data, split="0.5,0.25,0.25", seed=2)
    named = conversations(splits)
    assert sorted(sum(named.values(), [])) == [f"c{i}" for i in range(7)]  # each once
    assert splits.sizes() == {"train": 18, "val": 9, "test": 9}
    assert splits.mode == SplitMode.FRACTIONS and splits.shared_conversations() == {} and splits.note is None
    assert conversations(make_splits(data, split="0.5,0.25,0.25", seed=2)) == named
    tied = {tuple(conversations(make_splits(data, split="0.5,0.25,0.25", seed=s))["test"]) for s in range(8)}
    assert len(tied) > 1  # val and test have equal shares: the seed decides which is which


def test_fractions_with_three_conversations_fill_every_split_and_per_split_caps():
    splits = make_splits(dataset(9, 1, 1), split="0.4,0.3,0.3")
    assert all(len(part) == 1 for part in conversations(splits).values())  # even where 9 questions would fit one
    capped = make_splits(dataset(9, 9, 9, 9), split="0.5,0.25,0.25", per_split=4)
    assert all(size <= 4 for size in capped.sizes().values())
    named = conversations(capped)
    assert not set(named["train"]) & (set(named["val"]) | set(named["test"]))


def test_fractions_with_two_conversations_keep_the_test_whole_and_apart():
    splits = make_splits(dataset(9, 4), split="0.4,0.3,0.3")  # the test's share is 3.9 questions: c1's four
    assert conversations(splits)["test"] == ["c1"] and splits.sizes()["test"] == 4
    assert conversations(splits)["train"] == conversations(splits)["val"] == ["c0"]
    assert not question_ids(splits)["train"] & question_ids(splits)["val"]
    assert splits.mode == SplitMode.TRAIN_VAL_SHARED and splits.shared_conversations() == {"c0": ["train", "val"]}
    assert splits.note is not None and "the test is c1" in splits.note


def test_a_single_conversation_splits_its_questions_and_says_so():
    splits = make_splits(dataset(9), split="0.4,0.3,0.3")
    record = splits.to_dict()
    assert record["mode"] == "questions (single conversation)"
    assert record["shared_conversations"] == {"c0": ["train", "val", "test"]}
    assert "single conversation (c0)" in record["note"]
    ids = question_ids(splits)
    assert not ids["train"] & ids["val"] and not ids["val"] & ids["test"] and not ids["train"] & ids["test"]


def test_the_record_tells_other_questions_apart_and_reads_an_older_record():
    data = dataset(9, 9, 9)
    record = make_splits(data, train="c0", val="c1", test="c2").to_dict()
    assert [record[name]["conversations"] for name in SPLIT_NAMES] == [["c0"], ["c1"], ["c2"]]
    assert same_splits(record, make_splits(data, train="c0", val="c1", test="c2").to_dict())
    other = make_splits(data, train="c0", val="c1", test="c2", per_split=5, seed=1).to_dict()
    resampled = make_splits(data, train="c0", val="c1", test="c2", per_split=5, seed=2).to_dict()
    assert other["test"]["questions"] == resampled["test"]["questions"] == 5
    assert other["test"]["digest"] != resampled["test"]["digest"] and not same_splits(other, resampled)
    # a record written before digests and shared conversations were kept: compared on the keys it has
    older = {"mode": "conversations", **{name: {k: record[name][k] for k in ("conversations", "questions")}
                                         for name in SPLIT_NAMES}}
    assert same_splits(older, record)
    assert not same_splits({**older, "val": {"conversations": ["c0"], "questions": 9}}, record)
    assert not same_splits(None, record) and not same_splits({"mode": "conversations"}, record)
