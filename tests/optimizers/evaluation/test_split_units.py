"""Questions that share evidence go to one split: conversations whose evidence sessions overlap (by session id or
by their turns) form one unit, whatever the seed, and the record names the units."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memtrace_opt.data import Conversation, Dataset, Question, Session, Turn, load_longmemeval
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers.evaluation.split_units import evidence_sessions, evidence_units
from memtrace_opt.optimizers.evaluation.splits import HELD_OUT, SAME_CONVERSATION, SPLIT_NAMES, make_splits
from tests.conftest import shared_data_path

HOBBIES = ("rowing", "knitting", "bouldering", "chess", "salsa", "beekeeping", "archery", "origami", "fencing",
           "kayaking", "juggling", "calligraphy")


def session(index: int, lines: tuple[str, ...], *, session_id: str | None = None, answer: bool = False) -> Session:
    turns = tuple(Turn(f"D{index}:{n}", "user" if n % 2 else "assistant", text, index, "2031/05/0{index}")
                  for n, text in enumerate(lines, start=1))
    return Session(index, f"2031/05/0{index}", turns, session_id, answer)


def record(sample_id: str, *sessions: Session, evidence: tuple[str, ...] = ()) -> Conversation:
    """One question about `sessions` (a LongMemEval-like record: one question, its own history)."""
    question = Question(f"{sample_id}", f"What did the user take up ({sample_id})?", "a hobby", "single-session-user",
                        None, evidence, abstention=sample_id.endswith("_abs"))
    return Conversation(sample_id, ("user", "assistant"), tuple(sessions), (question,), "invented")


def hobby(name: str) -> tuple[str, ...]:
    return (f"I took up {name} last spring.", f"How is the {name} going?")


def pairs_dataset() -> Dataset:
    """Twelve one-question records; r3 and r3_abs hold the same evidence turns under other session ids (the
    variant's turns are not marked as evidence: the loader names its answer session), r7 and r8 the same session
    id with other turns, and every record the same distraction session, which joins none."""
    noise = session(2, ("The weather was grey all week.", "Grey weeks pass."), session_id="noise-1")
    records = []
    for index, name in enumerate(HOBBIES):
        sample_id = f"r{index}"
        records.append(record(sample_id, session(1, hobby(name), session_id=f"ans-{index}"), noise,
                              evidence=("D1:1",)))
    records.append(record("r3_abs", session(1, hobby(HOBBIES[3]), session_id="ans-3-abs", answer=True), noise))
    records[8] = record("r8", session(1, ("I sold my old kayak.", "Good riddance."), session_id="ans-7"), noise,
                        evidence=("D1:1",))
    return Dataset("invented", "invented.json", tuple(records))


def split_of(splits, sample_id: str) -> set[str]:
    return {name for name in SPLIT_NAMES for c in getattr(splits, name) if c.sample_id == sample_id}


def test_overlapping_evidence_by_turns_or_session_id_makes_one_unit_and_distraction_none():
    data = pairs_dataset()
    units = [tuple(c.sample_id for c in unit) for unit in evidence_units(data.conversations)]
    assert ("r3", "r3_abs") in units and ("r7", "r8") in units
    assert len(units) == len(data.conversations) - 2  # the shared distraction session joins nothing
    assert [s.session_id for s in evidence_sessions(data.conversations[-1])] == ["ans-3-abs"]


@pytest.mark.parametrize("seed", range(12))
def test_questions_sharing_evidence_go_to_one_split_for_any_seed(seed):
    splits = make_splits(pairs_dataset(), split="0.4,0.3,0.3", seed=seed)
    for first, second in (("r3", "r3_abs"), ("r7", "r8")):
        assert split_of(splits, first) == split_of(splits, second) and len(split_of(splits, first)) == 1
    record = splits.to_dict()
    assert record["shared_evidence"] == [["r3", "r3_abs"], ["r7", "r8"]]
    assert record["test_label"] == HELD_OUT and splits.held_out()


def test_naming_two_of_one_unit_in_two_splits_is_a_usage_error():
    with pytest.raises(ConfigError, match="'r3' \\(--train\\) and 'r3_abs' \\(--test\\) share an evidence session"):
        make_splits(pairs_dataset(), train="r3,r4", val="r5", test="r3_abs")
    splits = make_splits(pairs_dataset(), train="r7,r8", test="r0", seed=1)  # val drawn from the rest
    assert not {"r7", "r8", "r0"} & {c.sample_id for c in splits.val}


def test_val_is_never_drawn_from_a_unit_the_named_splits_hold():
    for seed in range(12):
        splits = make_splits(pairs_dataset(), train="r3,r0,r1,r2,r4,r5,r6,r9,r10,r11", test="r7", seed=seed)
        assert not {"r3_abs", "r8"} & {c.sample_id for c in splits.val}


def test_two_conversations_of_one_unit_split_their_questions_and_the_test_is_not_held_out():
    pair = [c for c in pairs_dataset().conversations if c.sample_id in ("r3", "r3_abs")]
    more = tuple(replace(c, questions=tuple(replace(c.questions[0], question_id=f"{c.sample_id}-{n}")
                                            for n in range(3))) for c in pair)
    splits = make_splits(Dataset("invented", "x.json", more), split="0.4,0.3,0.3")
    assert splits.test_label == SAME_CONVERSATION and not splits.held_out()
    assert splits.note is not None and "share evidence sessions (r3, r3_abs)" in splits.note


def test_longmemeval_abstention_variants_stay_beside_their_originals():
    data = load_longmemeval(shared_data_path("longmemeval", "longmemeval_oracle.json"))
    linked = [unit for unit in evidence_units(data.conversations) if len(unit) > 1]
    ids = {c.sample_id for c in data.conversations}
    varied = [(i.removesuffix("_abs"), i) for i in ids if i.endswith("_abs") and i.removesuffix("_abs") in ids]
    units = {c.sample_id: {d.sample_id for d in unit} for unit in linked for c in unit}
    assert len(varied) > 20 and all(abstention in units.get(original, ()) for original, abstention in varied)
    for seed in range(3):
        splits = make_splits(data, split="0.4,0.3,0.3", seed=seed)
        where = {c.sample_id: name for name in SPLIT_NAMES for c in getattr(splits, name)}
        assert all(len({where[c.sample_id] for c in unit}) == 1 for unit in linked)
