"""What an operation does in a memory's life, declared by the operation (`Operation.role`).

    class Summarize(LMOperation):
        op_name = "notes.summarize"
        role = OpRole.FORMS                 # it writes memory units from the conversation

    self.write = as_op(dspy.Predict(WriteNote), "notes.write", role=OpRole.FORMS)

A role says which error a fault of the op is and what a local target of its calls is: an op that forms units
should carry the information of the turns it reads; one that updates should leave the information it was shown
live; one that answers should answer. `role_for_name` guesses a role from an op name for runs recorded before ops
declared one (and for ops that still declare none); the caller warns once when it had to guess.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["OpRole", "role_for_name"]


class OpRole(str, Enum):
    """An op's part in a memory's life."""

    FORMS = "forms"  # forms memory units from the conversation: extracts, chunks, segments, ingests, stores
    UPDATES = "updates"  # changes units already stored: decides and applies updates, finds what a new fact updates
    DELETES = "deletes"  # deletes or trims units
    RETRIEVES = "retrieves"  # selects units for a question: retrieval, reranking, sufficiency checks, query writing
    ANSWERS = "answers"  # writes the answer to the question
    NONE = "none"  # none of these (formatting, logging): never a root cause

    @classmethod
    def parse(cls, value: OpRole | str | None) -> OpRole | None:
        """A role from its value ("forms") or itself; None for None or ""; ValueError for anything else."""
        if value is None or value == "":
            return None
        if isinstance(value, OpRole):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            names = ", ".join(role.value for role in cls)
            raise ValueError(f"unknown op role {value!r}: one of {names}") from None


# The op name's last part (after "<system>.") -> role, for ops that declare none. First match wins: a prefix of
# the part, else (for the words marked `anywhere`) the word anywhere in it.
_NAME_ROLES: tuple[tuple[str, OpRole, bool], ...] = (
    ("answer", OpRole.ANSWERS, False),
    ("trim", OpRole.DELETES, False),
    ("delete", OpRole.DELETES, False),
    ("forget", OpRole.DELETES, False),
    ("update_decision", OpRole.UPDATES, False),
    ("apply", OpRole.UPDATES, False),
    ("update", OpRole.UPDATES, False),
    ("search_similar", OpRole.UPDATES, False),
    ("consolidate", OpRole.UPDATES, False),
    ("extract", OpRole.FORMS, True),
    ("summar", OpRole.FORMS, False),
    ("detect_boundary", OpRole.FORMS, False),
    ("finalize", OpRole.FORMS, False),
    ("chunk", OpRole.FORMS, False),
    ("index", OpRole.FORMS, False),
    ("ingest", OpRole.FORMS, False),
    ("store", OpRole.FORMS, False),
    ("retrieve", OpRole.RETRIEVES, True),
    ("search", OpRole.RETRIEVES, True),
    ("merge", OpRole.RETRIEVES, False),
    ("rerank", OpRole.RETRIEVES, False),
    ("check_sufficiency", OpRole.RETRIEVES, False),
    ("sufficiency", OpRole.RETRIEVES, False),
    ("generate_queries", OpRole.RETRIEVES, False),
)


def role_for_name(op_name: str | None) -> OpRole | None:
    """The role an op named `op_name` most likely has, guessed from its last part; None when nothing matches."""
    if not op_name:
        return None
    part = op_name.rsplit(".", 1)[-1].lower()
    for word, role, anywhere in _NAME_ROLES:
        if part.startswith(word) or (anywhere and word in part):
            return role
    return None
