"""What a failed question needed, and where it entered the conversation.

`Evidence` names the turns that hold the answer: the gold evidence ids when the dataset gives them, else
pseudo-evidence, MemTrace's way: the turns ranked highest by BM25 and by dense similarity (each over-sampled
2x) fused by reciprocal rank (k=60), with the question plus the gold answer as the query.

`NeededInfo.holds(text)` is the lexical test attribution rules use for "this value still carries the needed
information": all of a short gold answer's content words (most of a long one; question words left out),
or most of an evidence turn's content words in one part of the value. `NeededInfo.written(text)` is the test of a
fact written with a pronoun for the person or a relative date ("she adopted him two days ago"), for values that
descend from an evidence turn (see `_provenance.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from memtrace_opt.attribution._graph import GraphView
from memtrace_opt.memory.index import rank_texts
from memtrace_opt.text.porter import porter_stem
from memtrace_opt.text.words import CALENDAR_WORDS, FACT_STOP_WORDS, PERSONAL_PRONOUNS, RELATIVE_TIME_WORDS

__all__ = ["Evidence", "NeededInfo", "content_tokens", "find_evidence", "needed_info", "pseudo_evidence",
           "speakers", "split_evidence_ids"]


_WORD = re.compile(r"[a-z0-9]+")
_CALENDAR = frozenset(porter_stem(w) for w in CALENDAR_WORDS)
# the words of a date answer besides its numbers and calendar words ("the weekend after 14 October 2031")
_DATE_UNITS = frozenset(porter_stem(w) for w in "day week weekend month year before after early late mid".split())


def _date_word(token: str) -> bool:
    """A stemmed word of a date: a number, a month or weekday, a unit of time or before/after."""
    return token.isdigit() or token in _CALENDAR or token in _DATE_UNITS or token.rstrip("stndrh").isdigit()
_NAME = re.compile(r"\b[A-Z][a-zA-Z'-]+")  # capitalised words after the question's first: who/what it is about
ANSWER_RECALL = 0.65
SHORT_ANSWER = 3
TURN_RECALL = 0.6
MIN_TURN_TOKENS = 3


@lru_cache(maxsize=200_000)
def content_tokens(text: str) -> frozenset[str]:
    """Stemmed content words: lower-case words and numbers less `text.words.FACT_STOP_WORDS`."""
    return frozenset(porter_stem(t) for t in _WORD.findall(text.lower()) if t not in FACT_STOP_WORDS)


@dataclass(frozen=True)
class Evidence:
    """The turn nodes that hold the answer. `source` is "gold" or "pseudo"; `strict` are the turns whose
    words count for `NeededInfo` (all gold turns, or the best few pseudo turns)."""

    turns: tuple[str, ...]
    source: str
    strict: tuple[str, ...] = ()


@dataclass(frozen=True)
class NeededInfo:
    """The information a failed question needed: its gold answer and the text of its evidence turns; `people` the
    conversation's speakers (with the names the question uses: who a fact may call "she")."""

    question: str
    gold: str
    evidence_texts: tuple[str, ...] = ()
    abstention: bool = False
    people: tuple[str, ...] = ()
    answer_tokens: frozenset[str] = field(init=False)
    turn_tokens: tuple[frozenset[str], ...] = field(init=False)
    names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        answer = content_tokens(self.gold) if not self.abstention else frozenset()
        specific = answer - content_tokens(self.question)
        object.__setattr__(self, "answer_tokens", specific or answer)
        named = " ".join(_NAME.findall(self.question.split(" ", 1)[1] if " " in self.question else ""))
        object.__setattr__(self, "names", frozenset(t for t in content_tokens(named) - answer if len(t) > 1))
        turns = tuple(t for t in (content_tokens(x) for x in self.evidence_texts) if len(t) >= MIN_TURN_TOKENS)
        object.__setattr__(self, "turn_tokens", turns)

    def score(self, text: str | Sequence[str]) -> float:
        """How much of the needed information a value carries, in [0, 1] (1 = clearly all of it). `text` is
        one text or a value's parts (see `value_parts`). The answer's words must come back in one segment
        (a line, or a sentence of a long line) that also names someone or something the question names
        (if it names any); the date of the part (a `[date]` header line, a `(... 2023)` timestamp) counts
        for every segment of it; every number of the answer (a day, a year, a count) must be there. A list
        answer's words may come from several segments. An evidence turn's words must come back in one
        part."""
        parts = [text] if isinstance(text, str) else list(text)
        parts = [p for p in parts if p]
        if not parts:
            return 0.0
        best = 0.0
        if self.answer_tokens:
            found = [seg for p in parts for seg in segments(p) if not self.names or self.names & seg.tokens]
            if self.list_answer:
                found = [Segment(frozenset().union(*(s.tokens for s in found)), frozenset().union(*(s.dates for s in found)))]
            need = _required(len(self.answer_tokens))
            numbers = frozenset(t for t in self.answer_tokens if t.isdigit())
            for seg in found:
                have = seg.tokens | seg.dates
                score = len(self.answer_tokens & have) / need
                best = max(best, score if numbers <= have else min(score, 0.99))
        if self.turn_tokens:
            for tokens in (content_tokens(p) for p in parts):
                for turn in self.turn_tokens:
                    best = max(best, len(turn & tokens) / len(turn) / TURN_RECALL)
        return min(1.0, best)

    @property
    def list_answer(self) -> bool:
        """A gold answer listing several items ("Boston, Denver"): its words may come from different parts."""
        return any(mark in self.gold for mark in (",", ";", " and "))

    def holds(self, text: str | Sequence[str]) -> bool:
        return self.score(text) >= 1.0

    def written(self, text: str | Sequence[str]) -> bool:
        """Whether a value holds the needed information as a fact written with a pronoun or a relative date: a
        segment with a pronoun or a relative time word ("she", "two days ago") holds the answer's content words
        other than the people's names (the question's names and `people`), every number among them. Where the
        answer is a date and the segment says a relative one, the relative date stands for it: the segment must hold
        the question's own content words instead, the people left out ("Odalys launched her kayak two days ago" for
        "When did Odalys launch her kayak?", gold "14 October 2031"). Meant for values that
        descend from an evidence turn (`_provenance.py`); `holds` is the test for any value."""
        if self.abstention or not self.answer_tokens:
            return False
        parts = [text] if isinstance(text, str) else [p for p in text if p]
        people = self.names | content_tokens(" ".join(self.people))
        answer = self.answer_tokens - people
        date = bool(answer) and all(_date_word(t) for t in answer)
        found = [seg for p in parts for seg in segments(p) if seg.pronoun or seg.relative]
        if self.list_answer and not date and found:  # a list's items may come from several segments
            found = [Segment(frozenset().union(*(s.tokens for s in found)), frozenset().union(*(s.dates for s in found)),
                             any(s.pronoun for s in found), any(s.relative for s in found))]
        for seg in found:
            need = content_tokens(self.question) - people if date and seg.relative else answer
            have = seg.tokens | seg.dates
            numbers = frozenset(t for t in need if t.isdigit())
            if need and numbers <= have and len(need & have) >= _required(len(need)):
                return True
        return False


@dataclass(frozen=True)
class Segment:
    """The content words of a line or sentence, and the date words of the part it is in; whether it says a personal
    pronoun, and a relative time word (`text.words`)."""

    tokens: frozenset[str]
    dates: frozenset[str]
    pronoun: bool = False
    relative: bool = False


_HEADER = re.compile(r"^\s*\[[^\]]*\]\s*$")
_STAMP = re.compile(r"\(([^()]*\b(?:19|20)\d\d\b[^()]*)\)")
_SPEAKER = re.compile(r"^\s*([A-Z][\w .'-]{0,40}?):\s")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
LONG_LINE = 300


@lru_cache(maxsize=100_000)
def segments(text: str) -> tuple[Segment, ...]:
    """A part split into segments for the answer test (see `NeededInfo.score`)."""
    lines = [line for line in text.split("\n") if line.strip()]
    dates = frozenset().union(*(content_tokens(line) for line in lines if _HEADER.match(line)),
                              *(content_tokens(m) for m in _STAMP.findall(text)))
    found: list[Segment] = []
    for line in lines:
        if _HEADER.match(line):
            continue
        if len(line) <= LONG_LINE:
            found.append(_segment(line, dates))
            continue
        speaker = _SPEAKER.match(line)
        prefix = speaker.group(1) + " " if speaker else ""
        found.extend(_segment(prefix + s, dates) for s in _SENTENCES.split(line) if s.strip())
    return tuple(found)


def _segment(text: str, dates: frozenset[str]) -> Segment:
    words = set(_WORD.findall(text.lower()))
    return Segment(content_tokens(text), dates, bool(words & PERSONAL_PRONOUNS), bool(words & RELATIVE_TIME_WORDS))


def _required(n: int) -> int:
    """Answer words a value must carry: all of a short answer (dates, names), most of a long one."""
    return n if n <= SHORT_ANSWER else math.ceil(ANSWER_RECALL * n)


def pseudo_evidence(
    view: GraphView, query: str, k: int = 8, *, embedder: str = "minilm", oversample: int = 2
) -> list[str]:
    """The `k` turn nodes most related to `query`: BM25 and dense top-`k*oversample` lists fused by RRF
    (k=60). Falls back to BM25 alone when the embedder cannot be loaded."""
    turns = [n for n in view.graph if view.is_turn(n)]
    if not turns or k <= 0:
        return []
    ranked = rank_texts([view.turn_text(t) for t in turns], query, min(len(turns), k * oversample), embedder=embedder)
    return [turns[i] for i in ranked[:k]]


_ID_SPLIT = re.compile(r"[;,\s]+")  # a few LoCoMo evidence ids hold several ids ("D8:6; D9:17")


def split_evidence_ids(ids: Sequence[str]) -> list[str]:
    """The dialogue ids of a question's evidence, an entry that holds several ("D8:6; D9:17") split."""
    return [part for e in ids for part in _ID_SPLIT.split(str(e)) if part]


def find_evidence(
    view: GraphView,
    evidence_ids: Sequence[str],
    question: str,
    gold: str,
    *,
    k: int = 8,
    strict_k: int = 1,
    embedder: str = "minilm",
) -> Evidence:
    """Gold evidence turns present in the graph, else pseudo-evidence for question + gold answer."""
    ids = split_evidence_ids(evidence_ids)
    gold_turns = tuple(dict.fromkeys(f"turn:{e}" for e in ids if f"turn:{e}" in view.graph))
    if gold_turns:
        return Evidence(gold_turns, "gold", gold_turns)
    ranked = tuple(pseudo_evidence(view, f"{question} {gold}", k, embedder=embedder))
    return Evidence(ranked, "pseudo", ranked[:strict_k])


def needed_info(view: GraphView, evidence: Evidence, question: str, gold: str, abstention: bool) -> NeededInfo:
    """The needed information: the gold answer's words, plus the evidence turns' words when the evidence is
    gold (pseudo-evidence turns count only when the answer has no content words of its own); the people are the
    conversation's speakers."""
    texts = tuple(view.turn_text(t) for t in evidence.strict)
    people = speakers(view)
    info = NeededInfo(question, gold, texts, abstention, people)
    if evidence.source != "gold" and info.answer_tokens:
        info = NeededInfo(question, gold, (), abstention, people)
    return info


def speakers(view: GraphView) -> tuple[str, ...]:
    """The speakers of the graph's turns, in the order they first speak."""
    found: dict[str, None] = {}
    for node in view.graph:
        if view.is_turn(node):
            attrs = view.attrs(node)
            value = attrs.get("value")
            speaker = attrs.get("speaker") or (value.get("speaker") if isinstance(value, Mapping) else None)
            if speaker:
                found.setdefault(str(speaker), None)
    return tuple(found)
