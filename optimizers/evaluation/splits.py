"""Train / validation / test splits of a dataset slice.

Two ways, both deterministic:
* by conversation: `--train conv-26,conv-30 --val conv-41 --test conv-42,conv-43` names the conversations of
  each split (test conversations are then never seen during optimization);
* by question: with no conversation lists, the questions of the loaded slice are shuffled with the seed and
  cut by `--split 0.4,0.3,0.3` (the splits then share conversations and their memory, the cheapest setup).
`per_split` caps each split's question count (a deterministic sample).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memtrace_opt.data import Conversation, Dataset, DataSlice
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.roles import ModelRoles

__all__ = ["Splits", "SplitRequest", "parse_ids", "parse_fractions", "make_splits"]

SPLIT_NAMES = ("train", "val", "test")


@dataclass(frozen=True)
class SplitRequest:
    """What `memtrace optimize` and `memtrace compare` share: the system, the data slice, the model roles, the
    output directory, and how to split. `train`/`val`/`test` are comma-separated conversation ids; without them
    the questions of the slice are split by `split` fractions (`per_split` caps each split)."""

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
    """The conversations (each cut to the split's questions) of each split, and how they were made."""

    train: tuple[Conversation, ...]
    val: tuple[Conversation, ...]
    test: tuple[Conversation, ...]
    mode: str

    def sizes(self) -> dict[str, int]:
        return {name: sum(len(c.questions) for c in getattr(self, name)) for name in SPLIT_NAMES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            **{
                name: {
                    "conversations": [c.sample_id for c in getattr(self, name)],
                    "questions": sum(len(c.questions) for c in getattr(self, name)),
                }
                for name in SPLIT_NAMES
            },
        }


def parse_ids(text: str | None) -> tuple[str, ...]:
    """"conv-26, conv-30" -> ("conv-26", "conv-30"); None or "" -> ()."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


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


def _cap(conversations: Sequence[Conversation], cap: int | None, seed: int) -> tuple[Conversation, ...]:
    if cap is None:
        return tuple(conversations)
    keys = [(i, q.question_id) for i, c in enumerate(conversations) for q in c.questions]
    chosen = set(random.Random(seed).sample(keys, min(cap, len(keys))))
    out = [replace(c, questions=tuple(q for q in c.questions if (i, q.question_id) in chosen))
           for i, c in enumerate(conversations)]
    return tuple(c for c in out if c.questions)


def _by_conversation(dataset: Dataset, ids: dict[str, tuple[str, ...]]) -> dict[str, tuple[Conversation, ...]]:
    known = {c.sample_id: c for c in dataset.conversations}
    out: dict[str, tuple[Conversation, ...]] = {}
    for name in SPLIT_NAMES:
        missing = [i for i in ids[name] if i not in known]
        if missing:
            raise ConfigError(f"--{name}: {dataset.name} has no conversation {missing[0]!r}")
        out[name] = tuple(known[i] for i in ids[name])
    if not out["train"]:
        raise ConfigError("--train names no conversation")
    return out


def _by_question(dataset: Dataset, fractions: tuple[float, float, float], seed: int) -> dict[str, tuple[Conversation, ...]]:
    keys = [(c.sample_id, q.question_id) for c in dataset.conversations for q in c.questions]
    if len(keys) < 3:
        raise ConfigError(f"{dataset.name}: {len(keys)} questions cannot be split three ways")
    random.Random(seed).shuffle(keys)
    n_train = max(1, round(fractions[0] * len(keys)))
    n_val = max(1, round(fractions[1] * len(keys)))
    parts = {"train": keys[:n_train], "val": keys[n_train:n_train + n_val], "test": keys[n_train + n_val:]}
    out = {}
    for name, chosen in parts.items():
        wanted = set(chosen)
        convs = [replace(c, questions=tuple(q for q in c.questions if (c.sample_id, q.question_id) in wanted))
                 for c in dataset.conversations]
        out[name] = tuple(c for c in convs if c.questions)
    return out


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
    """The three splits of `dataset` (see the module docstring). A split left empty by conversation lists
    (no --val) reuses the training conversations."""
    ids = {"train": parse_ids(train), "val": parse_ids(val), "test": parse_ids(test)}
    if any(ids.values()):
        parts = _by_conversation(dataset, ids)
        if not parts["val"]:
            parts["val"] = parts["train"]
        mode = "conversations"
    else:
        parts = _by_question(dataset, parse_fractions(split), seed)
        mode = "questions"
    capped = {name: _cap(parts[name], per_split, seed + i) for i, name in enumerate(SPLIT_NAMES)}
    if not capped["train"] or not capped["val"]:
        raise ConfigError("the train and validation splits must each hold at least one question")
    return Splits(capped["train"], capped["val"], capped["test"], mode)
