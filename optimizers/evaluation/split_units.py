"""The units of the splits: conversations whose evidence sessions overlap go to one split together.

A held-out question must not hang on a session the optimizer saw. Conversations are kept apart by the splits, but
two conversations can hold the same session: LongMemEval gives each question its own history, and an abstention
variant (`_abs`) holds its original's evidence session again, under another session id. So the splits move
units, not conversations:

    evidence_units([a, b, c])  ->  [(a, c), (b,)]   # a and c hold a session with the same turns

A conversation's evidence sessions are those holding an evidence turn of one of its questions, and those the
dataset names as answer sessions (`Session.answer_session`). Two overlap when they have the same session id or
the same turns (speaker and text). Only evidence sessions count: haystack sessions that many questions share as
distraction do not join them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from memtrace_opt.data import Conversation, Session

__all__ = ["evidence_sessions", "evidence_units"]


def evidence_sessions(conversation: Conversation) -> list[Session]:
    """The sessions holding an evidence turn of the conversation's questions, or named as answer sessions."""
    numbers = {n for question in conversation.questions for n in question.evidence_sessions()}
    return [s for s in conversation.sessions if s.index in numbers or s.answer_session]


def _keys(session: Session) -> Iterator[str]:
    """What identifies a session across conversations: its id, and a digest of its turns (an empty one: none)."""
    if session.session_id:
        yield f"id:{session.session_id}"
    if session.turns:
        text = "\n".join(f"{turn.speaker}\t{turn.text}" for turn in session.turns)
        yield "turns:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def evidence_units(conversations: Sequence[Conversation]) -> list[tuple[Conversation, ...]]:
    """`conversations` grouped so that any two whose evidence sessions overlap, directly or through others, are in
    one group; the groups in the order of their first conversation, each in the given order."""
    parent = list(range(len(conversations)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for index, conversation in enumerate(conversations):
        for session in evidence_sessions(conversation):
            for key in _keys(session):
                first = owner.setdefault(key, index)
                parent[root(index)] = root(first)
    groups: dict[int, list[Conversation]] = {}
    for index, conversation in enumerate(conversations):
        groups.setdefault(root(index), []).append(conversation)
    return [tuple(group) for group in groups.values()]
