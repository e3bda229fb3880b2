"""Train / validation / test splits of a dataset slice: a conversation belongs to one split only.

A held-out figure must never include a conversation the optimizer saw (its turns, its memory), nor a question
whose evidence session it saw in another conversation (`split_units.py`: LongMemEval's abstention variants), so
every way of splitting keeps whole units apart, a unit being the conversations whose evidence sessions overlap,
unless the data has too few of them (then the manifest says so, and the test's figure is labelled
"same-conversation questions", not held-out):

* named: `--train conv-26,conv-30 --val conv-41 --test conv-42,conv-43`. A conversation named by two of the
  flags, or two conversations of one unit named by two, is a usage error. Without `--val`, validation is drawn (seeded) from the data's conversations outside
  `--train` and `--test` (and their units), as many as `--train` names; with none left, `--train`'s questions are split train : val
  by the `--split` fractions (the two then share those conversations, never the test's).
* by fractions: without conversation lists, `--split 0.4,0.3,0.3` assigns whole units to the splits (seeded),
  each split's question count as close to its share as the units allow, every split holding one when there are
  at least three. With two units, test takes the one nearer its share and train and val split the other's
  questions; with one (the packaged sample, a single conversation), its questions are split by the fractions.

`per_split` caps each split's question count (a deterministic sample). A choice the flags did not spell out is
one line, `Splits.note`, logged and recorded with the lists (`Splits.to_dict`).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from memtrace_opt import progress
from memtrace_opt.data import Conversation, Dataset, DataSlice
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.optimizers.evaluation.split_fractions import assign_by_fractions
from memtrace_opt.optimizers.evaluation.split_units import evidence_units

__all__ = ["Splits", "SplitMode", "SplitRequest", "parse_ids", "parse_fractions", "make_splits", "same_splits",
           "HELD_OUT", "SAME_CONVERSATION", "NOT_HELD_OUT"]

log = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "val", "test")
# the label of the test's figure: questions the optimizer saw nothing of, or questions whose memory (or evidence)
# was built with the training and validation questions
HELD_OUT = "held-out test"
SAME_CONVERSATION = "same-conversation questions"
NOT_HELD_OUT = "not held out: their memory was built with the training and validation questions"


class SplitMode(str, Enum):
    """How the splits were made (compare.json and the manifest record the value)."""

    NAMED = "conversations"  # the conversation lists of --train/--val/--test (val drawn from the rest if not named)
    FRACTIONS = "conversations by fractions"  # --split over whole conversations
    TRAIN_VAL_SHARED = "conversations (train and val share)"  # too few conversations: train/val split questions
    SINGLE = "questions (single conversation)"  # one conversation (or unit): its questions split three ways


@dataclass(frozen=True)
class SplitRequest:
    """What `memtrace optimize` and `memtrace compare` share: the system, the data slice, the model roles, the
    output directory, and how to split. `train`/`val`/`test` are comma-separated conversation ids; without them
    the conversations of the slice are split by `split` fractions (`per_split` caps each split)."""

    system: str
    data: str
    out: Path
    roles: ModelRoles = field(default_factory=ModelRoles)
    data_slice: DataSlice = field(default_factory=DataSlice)
    train: str | None = None
    val: str | None = None
    test: str | None = None
    split: str = "0.4,0.3,0.3"
    per_split: int | None = None


@dataclass(frozen=True)
class Splits:
    """The conversations (each cut to the split's questions) of each split, how they were made, the one-line
    note of a choice the flags did not spell out (None when they did), and `linked`: the ids of each group of
    two or more of the splits' conversations whose evidence sessions overlap (`evidence_units`)."""

    train: tuple[Conversation, ...]
    val: tuple[Conversation, ...]
    test: tuple[Conversation, ...]
    mode: SplitMode
    note: str | None = None
    linked: tuple[tuple[str, ...], ...] = ()

    def sizes(self) -> dict[str, int]:
        return {name: sum(len(c.questions) for c in getattr(self, name)) for name in SPLIT_NAMES}

    def shared_conversations(self) -> dict[str, list[str]]:
        """Conversation id -> the splits holding its questions, for each one in more than one split."""
        where: dict[str, list[str]] = {}
        for name in SPLIT_NAMES:
            for conversation in getattr(self, name):
                where.setdefault(conversation.sample_id, []).append(name)
        return {sample_id: names for sample_id, names in where.items() if len(names) > 1}

    def held_out(self) -> bool:
        """Whether the test shares nothing with train and val: no conversation, no evidence session."""
        unit = {sample_id: group[0] for group in self.linked for sample_id in group}
        seen = {unit.get(c.sample_id, c.sample_id) for c in (*self.train, *self.val)}
        return not any(unit.get(c.sample_id, c.sample_id) in seen for c in self.test)

    @property
    def test_label(self) -> str:
        """What the test's figure is: HELD_OUT, or SAME_CONVERSATION when the test shares memory with train/val."""
        return HELD_OUT if self.held_out() else SAME_CONVERSATION

    def to_dict(self) -> dict[str, Any]:
        """The record compare.json and the manifest keep: per split its conversations, question count and a
        digest of its question ids; the mode, the shared conversations, the conversations linked by evidence
        (`shared_evidence`), the test's label and the note."""
        return {
            "mode": self.mode.value,
            **{name: _split_record(getattr(self, name)) for name in SPLIT_NAMES},
            "shared_conversations": self.shared_conversations(),
            "shared_evidence": [list(group) for group in self.linked],
            "test_label": self.test_label,
            "note": self.note,
        }


def _split_record(conversations: Sequence[Conversation]) -> dict[str, Any]:
    keys = sorted(f"{c.sample_id}\t{q.question_id}" for c in conversations for q in c.questions)
    return {
        "conversations": [c.sample_id for c in conversations],
        "questions": len(keys),
        "digest": hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()[:16],
    }


def same_splits(saved: Mapping[str, Any] | None, current: Mapping[str, Any]) -> bool:
    """Whether a recorded `Splits.to_dict` (`saved`) holds the same splits as `current`. A record written before
    the digests and shared conversations were kept is compared on the keys it has (mode, lists, counts)."""
    if not isinstance(saved, Mapping) or any(k not in saved for k in ("mode", *SPLIT_NAMES)):
        return False
    for key, value in saved.items():
        mine = current.get(key)
        if key in SPLIT_NAMES and isinstance(value, Mapping) and isinstance(mine, Mapping):
            if any(mine.get(k) != v for k, v in value.items()):
                return False
        elif mine != value:
            return False
    return True


def parse_ids(text: str | None) -> tuple[str, ...]:
    """"conv-26, conv-30" -> ("conv-26", "conv-30"); None or "" -> (); a repeated id once."""
    return tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))


def parse_fractions(text: str) -> tuple[float, float, float]:
    """"0.4,0.3,0.3" -> three positive fractions, normalized to sum to 1."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError as error:
        raise ConfigError(f"bad --split {text!r}: expected three numbers like 0.4,0.3,0.3") from error
    if len(values) != 3 or any(v <= 0 for v in values):
        raise ConfigError(f"bad --split {text!r}: expected three positive numbers like 0.4,0.3,0.3")
    total = sum(values)
    return (values[0] / total, values[1] / total, values[2] / total)


class _Parts(NamedTuple):
    """The uncapped splits, by name, how they were made and the note."""

    conversations: dict[str, tuple[Conversation, ...]]
    mode: SplitMode
    note: str | None = None


def _cap(conversations: Sequence[Conversation], cap: int | None, seed: int) -> tuple[Conversation, ...]:
    if cap is None:
        return tuple(conversations)
    keys = [(i, q.question_id) for i, c in enumerate(conversations) for q in c.questions]
    chosen = set(random.Random(seed).sample(keys, min(cap, len(keys))))
    out = [replace(c, questions=tuple(q for q in c.questions if (i, q.question_id) in chosen))
           for i, c in enumerate(conversations)]
    return tuple(c for c in out if c.questions)


def _split_questions(conversations: Sequence[Conversation], weights: Sequence[float], seed: int,
                     what: str) -> list[tuple[Conversation, ...]]:
    """The questions of `conversations` shuffled with `seed` and cut by `weights` (fractions summing to 1; each
    part but the last at least one question), each part as the conversations cut to its questions."""
    keys = [(c.sample_id, q.question_id) for c in conversations for q in c.questions]
    if len(keys) < len(weights):
        raise ConfigError(f"{what}: {len(keys)} questions cannot be split {len(weights)} ways")
    random.Random(seed).shuffle(keys)
    parts, start = [], 0
    for weight in weights[:-1]:
        count = max(1, round(weight * len(keys)))
        parts.append(keys[start:start + count])
        start += count
    parts.append(keys[start:])
    out = []
    for chosen in parts:
        wanted = set(chosen)
        cut = [replace(c, questions=tuple(q for q in c.questions if (c.sample_id, q.question_id) in wanted))
               for c in conversations]
        out.append(tuple(c for c in cut if c.questions))
    return out


def _pair(fractions: Sequence[float]) -> tuple[float, float]:
    """The train and val fractions of three, normalized to sum to 1."""
    return (fractions[0] / (fractions[0] + fractions[1]), fractions[1] / (fractions[0] + fractions[1]))


def _named(dataset: Dataset, ids: dict[str, tuple[str, ...]], split: str, seed: int, units: _Units) -> _Parts:
    known = {c.sample_id: c for c in dataset.conversations}
    owner: dict[str, str] = {}
    for name in SPLIT_NAMES:
        missing = [i for i in ids[name] if i not in known]
        if missing:
            raise ConfigError(f"--{name}: {dataset.name} has no conversation {missing[0]!r}")
        for sample_id in ids[name]:
            if sample_id in owner:
                raise ConfigError(f"conversation {sample_id!r} is named by --{owner[sample_id]} and --{name}: a "
                                  "conversation belongs to one split only (a held-out figure must not include a "
                                  "conversation the optimizer saw)")
            owner[sample_id] = name
    if not ids["train"]:
        raise ConfigError("--train names no conversation")
    _check_named_units(owner, units)
    parts = {name: tuple(known[i] for i in ids[name]) for name in SPLIT_NAMES}
    if parts["val"]:
        return _Parts(parts, SplitMode.NAMED)
    named_units = {units.of[i] for i in owner}
    outside = [c for c in dataset.conversations if c.sample_id not in owner and c.questions]
    rest = [c for c in outside if units.of[c.sample_id] not in named_units]
    if rest:
        drawn = set(random.Random(seed).sample(range(len(rest)), min(len(parts["train"]), len(rest))))
        val = tuple(c for i, c in enumerate(rest) if i in drawn)
        apart = " that share no evidence session with them" if len(rest) < len(outside) else ""
        note = (f"--val not given: validating on {', '.join(c.sample_id for c in val)}, drawn with seed {seed} from "
                f"the {len(rest)} conversation(s) outside --train and --test{apart}")
        return _Parts({**parts, "val": val}, SplitMode.NAMED, note)
    fractions = parse_fractions(split)
    train, val = _split_questions(parts["train"], _pair(fractions), seed, "--train")
    note = (f"--val not given and no conversation is left outside --train and --test: train and val split "
            f"--train's questions {fractions[0]:.2f} : {fractions[1]:.2f} (they share its conversations; "
            "the test shares none)")
    return _Parts({**parts, "train": train, "val": val}, SplitMode.TRAIN_VAL_SHARED, note)


def _check_named_units(owner: Mapping[str, str], units: _Units) -> None:
    """A ConfigError naming two conversations of one unit (sharing evidence) that two flags name."""
    first: dict[int, str] = {}
    for sample_id, name in owner.items():
        other = first.setdefault(units.of[sample_id], sample_id)
        if owner[other] != name:
            raise ConfigError(f"conversations {other!r} (--{owner[other]}) and {sample_id!r} (--{name}) share an "
                              "evidence session: they belong to one split (a held-out figure must not include "
                              "evidence the optimizer saw)")


def _questions(conversations: Sequence[Conversation]) -> int:
    return sum(len(c.questions) for c in conversations)


def _ids(conversations: Sequence[Conversation]) -> str:
    return ", ".join(c.sample_id for c in conversations)


def _by_fractions(dataset: Dataset, split: str, seed: int, units: _Units) -> _Parts:
    fractions = parse_fractions(split)
    conversations = [c for c in dataset.conversations if c.questions]
    groups = [g for g in (tuple(c for c in group if c.questions) for group in units.groups) if g]
    if len(groups) <= 1:
        cut = _split_questions(conversations, fractions, seed, dataset.name)
        what = (f"a single conversation ({conversations[0].sample_id}): its questions are split by --split, and "
                "train, val and test share its memory" if len(conversations) == 1 else
                f"conversations that all share evidence sessions ({_ids(conversations)}): their questions are split "
                "by --split, and train, val and test share that evidence")
        note = f"{dataset.name} holds {what}, so the test's figure is on same-conversation questions, not held-out ones"
        return _Parts(dict(zip(SPLIT_NAMES, cut, strict=True)), SplitMode.SINGLE, note)
    if len(groups) == 2:
        total = _questions(conversations)
        order = random.Random(seed).sample(groups, 2)  # the seed breaks a tie
        test = min(order, key=lambda g: abs(_questions(g) - fractions[2] * total))
        (other,) = [g for g in groups if g is not test]
        train, val = _split_questions(other, _pair(fractions), seed, _ids(other))
        what = "two conversations" if len(conversations) == 2 else "two groups of conversations sharing no evidence"
        note = (f"{dataset.name} holds {what}: the test is {_ids(test)}; train and val split the questions of "
                f"{_ids(other)} (they share its memory; the test shares none)")
        return _Parts({"train": train, "val": val, "test": test}, SplitMode.TRAIN_VAL_SHARED, note)
    where = assign_by_fractions([_questions(g) for g in groups], fractions, seed)
    split_of = {c.sample_id: k for group, k in zip(groups, where, strict=True) for c in group}
    parts = {name: tuple(c for c in conversations if split_of[c.sample_id] == index)
             for index, name in enumerate(SPLIT_NAMES)}
    return _Parts(parts, SplitMode.FRACTIONS)


class _Units(NamedTuple):
    """The dataset's conversations grouped by overlapping evidence (`evidence_units`), and each id's group."""

    groups: list[tuple[Conversation, ...]]
    of: dict[str, int]

    @classmethod
    def of_dataset(cls, dataset: Dataset) -> _Units:
        groups = evidence_units(dataset.conversations)
        return cls(groups, {c.sample_id: index for index, group in enumerate(groups) for c in group})

    def linked(self, kept: set[str]) -> tuple[tuple[str, ...], ...]:
        """The ids in `kept` of each group holding two or more of them."""
        ids = (tuple(c.sample_id for c in group if c.sample_id in kept) for group in self.groups)
        return tuple(group for group in ids if len(group) > 1)


def make_splits(
    dataset: Dataset,
    *,
    train: str | None = None,
    val: str | None = None,
    test: str | None = None,
    split: str = "0.4,0.3,0.3",
    per_split: int | None = None,
    seed: int = 0,
) -> Splits:
    """The three splits of `dataset` (see the module docstring); a ConfigError for a conversation named by two
    flags. The note, where there is one, is said in one line (`_say_note`)."""
    ids = {"train": parse_ids(train), "val": parse_ids(val), "test": parse_ids(test)}
    units = _Units.of_dataset(dataset)
    parts = (_named(dataset, ids, split, seed, units) if any(ids.values())
             else _by_fractions(dataset, split, seed, units))
    capped = {name: _cap(parts.conversations[name], per_split, seed + i) for i, name in enumerate(SPLIT_NAMES)}
    if not capped["train"] or not capped["val"]:
        raise ConfigError("the train and validation splits must each hold at least one question")
    if parts.note:
        _say_note(parts.note)
    kept = {c.sample_id for part in capped.values() for c in part}
    return Splits(capped["train"], capped["val"], capped["test"], parts.mode, parts.note, units.linked(kept))


def _say_note(note: str) -> None:
    """A line for the person watching: the progress reporter's note where one is shown (once, on a command's
    stderr, whatever logging is set to: the record is then at DEBUG), else a logged warning."""
    shown = progress.active()
    if shown:
        progress.note(note)
    (log.debug if shown else log.warning)("%s", note)
