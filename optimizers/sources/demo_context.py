"""A worked example's long context cut to the lines its answer rests on.

A demo of the answer step carries the context its call was shown: for long_context the whole transcript (1,100
to 1,900 tokens on two LoCoMo sessions), for RAG five chunks. What the demo teaches, how an answer is read off the
context and how it is worded, rests on a few of those lines: the turns that hold the answer. `compact_context`
keeps them and `window` lines either side, under their date headers, with "..." where lines were left out. The
turns are the case's gold evidence where it has some (`anchors`: the evidence turns' text), else the lines most
like the question and its answer (BM25 and MiniLM fused by rank). A context that has no such line, or that the
cut would not shorten, stays whole.

Only the step that writes the answer gets compact demos: an extraction's or an update decision's output covers all
of its input, and a cut input would no longer match it (`writes_answers`).

    compact_context(transcript, anchors=["I joined a sea-swimming club yesterday"], query="When ... 11 April 2021")
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memtrace_opt.attribution import GraphView
from memtrace_opt.memory.index import rank_texts
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.evidence import GraphCache
from memtrace_opt.optimizers.evaluation.examples import resolve_conversation

__all__ = ["compact_context", "case_anchors", "writes_answers", "COMPACT_CHARS", "WINDOW"]

COMPACT_CHARS = 1500  # an input field longer than this is cut, in an answer demo, to the lines around its answer
WINDOW = 2  # lines kept either side of each line that holds the answer
_NEEDLE = 80  # characters of an evidence turn looked for in a line
_SHORT = 20  # a shorter needle must end the line ("Odalys: Yes!" is not found inside another turn)
_HEADER = re.compile(r"^\[[^\]]*\]$")  # "[Monday, 12 April 2021]"


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def _holds(line: str, needle: str) -> bool:
    flat = _flat(line)
    return needle in flat and (len(needle) >= _SHORT or flat.endswith(needle))


def compact_context(text: str, anchors: Sequence[str] = (), query: str = "", *, window: int = WINDOW,
                    embedder: str | None = "minilm") -> str:
    """`text` cut to the lines that hold an anchor (else the two lines most like `query`), `window` lines either
    side and the date header each kept line sits under; "..." marks every run of lines left out. `text` itself
    when no line is found or the cut is no shorter."""
    lines = text.splitlines()
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line.strip())]
    body = [i for i, line in enumerate(lines) if line.strip() and not _HEADER.match(line.strip())]
    needles = [n for n in (_flat(a)[:_NEEDLE] for a in anchors) if n]
    hits = {i for i in body if any(_holds(lines[i], n) for n in needles)}
    if not hits and query.strip() and body:
        hits = {body[r] for r in rank_texts([lines[i] for i in body], query, 2, embedder=embedder)}
    if not hits:
        return text
    keep = {j for i in hits for j in range(max(0, i - window), min(len(lines), i + window + 1))}
    keep |= {max((h for h in headers if h <= i), default=i) for i in keep}
    out: list[str] = []
    last = -1
    for i in sorted(keep):
        if i > last + 1:
            out.append("...")
        out.append(lines[i])
        last = i
    if last < len(lines) - 1:
        out.append("...")
    cut = "\n".join(out)
    return cut if len(cut) < len(text) else text


def case_anchors(case: CaseResult) -> list[str]:
    """The text of the turns the case's gold evidence names (empty without evidence, or for a conversation that is
    not registered)."""
    if not case.question.evidence:
        return []
    try:
        _, conversation = resolve_conversation(case.conversation_key)
    except Exception:  # noqa: BLE001 - no conversation, no anchors: the ranking takes over
        return []
    wanted = set(case.question.evidence)
    return [turn.display_text() for session in conversation.sessions for turn in session.turns
            if turn.dia_id in wanted]


def writes_answers(predictor: str, evaluations: Sequence[EvalResult]) -> bool:
    """Whether `predictor` is the one whose call writes the answers (its op produced `ans:{question}`) in the cases
    of `evaluations`."""
    for evaluation in evaluations:
        graphs = GraphCache(evaluation)
        for case in evaluation.cases:
            if case.conversation_key not in evaluation.traces:
                continue
            graph = graphs.get(case.conversation_key)
            op = GraphView(graph).answer_op(case.case_id)
            if op is not None:
                return graph.nodes[op].get("predictor") == predictor
    return False
