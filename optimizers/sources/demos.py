"""Worked examples for the blamed predictor, taken from its own calls in correctly answered cases.

Besides the reflection LM's instructions, each round may try one more candidate for the chosen predictor: its
current instruction with up to N demos, each one of its recorded calls that served a correct answer (the
call whose output carried the gold answer, see `evidence.correct_calls`), in a case whose answer is right by
token F1 too (above the rule's `CORRECT_F1`): the token rule also counts a long answer that holds every gold word among many
others, and a demo of that teaches the predictor to answer at length. The cases answered best come first: those
whose answer F1 reaches `CLOSE_F1` (about the gold's words and not many more) before those only above
`CORRECT_F1` (in two runs the one demo chosen from the latter was a 30-word answer right by F1 0.51 because its
gold is long too, and the optimized program's answers grew by two to four words while its F1 fell). A demo is the call's input
fields, read back from the user message the adapter wrote (`[[ ## field ## ]]` sections; a string value is
shown verbatim when DSPy formats a demo), and its output fields, read back from the reply the same way (a reply
cut short or looping on one line is no example to follow: it is skipped). The calls whose inputs are most
like those of the blamed calls come first within each of those two tiers: a worked example of the kind of input
the predictor gets wrong.
The calls come from the round's minibatch and from a pool of training cases traced once for the purpose
(`DemoSettings.demo_pool`): a minibatch of eight often has no correct case at all (round 1 of a long_context run
scored 0.000 and so had no demos candidate), while a training conversation's other questions do.
A demo an earlier round offered the predictor and the program did not take is not offered again (the
round passes it as `exclude`): while the program is unchanged the same calls would rank first round after round.
Only the blamed predictor gets demos: unlike BootstrapFewShot, the rest of the program is untouched. A demo of
the step that writes the answers can be shown compact: its long context cut to the lines around its answer
(`demo_context.py`).

    demos = predictor_demos(program, "answer.predict", evaluation, memo, demos=2)
    with_instruction(program, "answer.predict", text, demos)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import dspy

from memtrace_opt.memory.index import rank_texts, rrf_fuse_indices
from memtrace_opt.metrics import CORRECT_F1
from memtrace_opt.optimizers.core.evidence import prompt_fields
from memtrace_opt.optimizers.evaluation.cached import CaseResult, EvalResult
from memtrace_opt.optimizers.evaluation.evidence import correct_calls
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
from memtrace_opt.optimizers.sources.demo_context import COMPACT_CHARS, case_anchors, compact_context

__all__ = ["predictor_demos", "closest_first", "compacted", "demo_from_exchange", "well_formed", "DEMO_CHARS",
           "DEMO_BUDGET", "CLOSE_F1", "demo_size"]

DEMO_CHARS = 8000  # about 2k tokens: a longer call (a whole transcript) would crowd an 8k window as a demo
# all of a predictor's demos together: about 5k tokens, leaving 3k of an 8k window for the call's own prompt.
# A demo of a question about a conversation carries the transcript (long_context, sessions 1-2 of LoCoMo: 1,100
# to 1,900 tokens): six of them and the question's own prompt pass the embedded model's 8,192 tokens
DEMO_BUDGET = 20000
CLOSE_F1 = 0.8  # an answer this close to the gold by token F1 has few words beyond it: the style to show


def well_formed(value: str) -> bool:
    """An output fit to be shown as a worked example: JSON that parses where it looks like JSON (a reply cut by
    the token limit does not), and no list item or line said twice (a small model's loop on one fact)."""
    text = value.strip()
    items: list[str] = text.splitlines()
    if text[:1] in "[{":
        try:
            parsed = json.loads(text)
        except ValueError:
            return False
        items = [item if isinstance(item, str) else json.dumps(item) for item in parsed] if isinstance(parsed, list) else []
    keys = [" ".join(item.lower().split()) for item in items]
    keys = [key for key in keys if key]
    return len(keys) == len(set(keys))


def demo_from_exchange(signature: Any, prompt: str, response: str) -> dict[str, str] | None:
    """The demo (input and output field values as text) of one recorded call, or None when a field is missing
    or an output is not `well_formed`."""
    inputs = prompt_fields(prompt)
    outputs = prompt_fields(response)
    demo: dict[str, str] = {}
    for name in signature.input_fields:
        if name not in inputs:
            return None
        demo[name] = inputs[name]
    for name in signature.output_fields:
        if not outputs.get(name) or not well_formed(outputs[name]):
            return None
        demo[name] = outputs[name]
    return demo


def predictor_demos(
    program: dspy.Module,
    predictor: str,
    evaluation: EvalResult | Sequence[EvalResult],
    memo: ReplayMemo,
    *,
    demos: int = 2,
    demo_chars: int = DEMO_CHARS,
    demo_budget: int | None = DEMO_BUDGET,
    exclude: Sequence[dict[str, str]] = (),
    like: Sequence[str] = (),
    embedder: str | None = "minilm",
    compact: bool = False,
) -> list[dict[str, str]]:
    """Up to `demos` demos for `predictor` from its calls in the correct cases of `evaluation` (one, or several:
    the round's minibatch and the training cases traced for demos) whose answer F1 is above `CORRECT_F1` (distinct calls, none longer than `demo_chars`, none already among `exclude` or the
    predictor's demos). Those of answers with F1 >= `CLOSE_F1` come first; within each tier, with `like` (the
    prompts of the blamed calls), the calls most like the blamed ones come first (`closest_first`). A demo that
    would take the predictor's demos, old and new, past `demo_budget` (None: no limit) is passed over for
    the next that fits. With `compact` (for the predictor that writes the answers), an input field longer than
    `COMPACT_CHARS` is cut to the lines around the answer (`demo_context.compact_context`); the sizes counted are
    the demos' as shown."""
    if demos < 1:
        return []
    signature = dict(program.named_predictors())[predictor].signature
    existing = [dict(d) for d in dict(program.named_predictors())[predictor].demos]
    pool: list[dict[str, str]] = []  # the demos as recorded: their likeness to the blamed calls is read on these
    shown: list[dict[str, str]] = []  # and as they are given to the predictor (compacted, with `compact`)
    close: list[bool] = []  # per pool entry: its answer's F1 reaches CLOSE_F1 (a case without F1 counts as close)
    seen: set[str] = set()
    evaluations = [evaluation] if isinstance(evaluation, EvalResult) else list(evaluation)
    calls = (pair for each in evaluations for pair in correct_calls(predictor, each, memo))
    for case, exchange in calls:
        f1 = case.score.scores.get("f1")
        if f1 is not None and f1 <= CORRECT_F1:
            continue
        if exchange.prompt in seen:
            continue
        seen.add(exchange.prompt)
        demo = demo_from_exchange(signature, exchange.prompt, exchange.response)
        if demo is None:
            continue
        given = compacted(demo, list(signature.input_fields), case, embedder) if compact else demo
        if demo_size(given) > demo_chars or given in existing or given in exclude:
            continue
        pool.append(demo)
        shown.append(given)
        close.append(f1 is None or f1 >= CLOSE_F1)
    order = closest_first(list(signature.input_fields), pool, like, embedder=embedder) if like else range(len(pool))
    tiered = [i for i in order if close[i]] + [i for i in order if not close[i]]
    room = math.inf if demo_budget is None else demo_budget - sum(map(demo_size, existing))
    chosen: list[dict[str, str]] = []
    for demo in (shown[i] for i in tiered):
        if len(chosen) < demos and demo_size(demo) <= room:
            chosen.append(demo)
            room -= demo_size(demo)
    return chosen


def compacted(demo: dict[str, str], inputs: Sequence[str], case: CaseResult, embedder: str | None,
              query: str | None = None) -> dict[str, str]:
    """`demo` with each input field longer than `COMPACT_CHARS` cut to the lines around its answer: the case's
    evidence turns, else the lines most like `query` (default: its question and answer)."""
    query = f"{case.question.question} {case.prediction}" if query is None else query
    anchors = case_anchors(case)
    return {name: compact_context(value, anchors, query, embedder=embedder)
            if name in inputs and len(value) > COMPACT_CHARS else value for name, value in demo.items()}


def demo_size(demo: Mapping[str, Any]) -> int:
    """A demo's characters: what it adds to every prompt of its predictor, near enough."""
    return sum(len(str(value)) for value in demo.values())


def closest_first(fields: Sequence[str], demos: Sequence[dict[str, str]], like: Sequence[str], *,
                  embedder: str | None = "minilm") -> list[int]:
    """Indices of `demos`, those whose inputs are most like the `like` prompts first (BM25 and dense ranking
    fused by RRF over all of them), the others after in their order. Only the input fields that differ between
    the calls are compared: a field they share (one conversation's transcript, shown to every question) says
    nothing about which demo resembles a failure, and would drown the field that does (the question)."""
    queries = [prompt_fields(text) for text in like]
    varying = [name for name in fields
               if len({d.get(name, "") for d in demos} | {q.get(name, "") for q in queries}) > 1]
    if not demos or not varying:
        return list(range(len(demos)))
    texts = ["\n".join(d.get(name, "") for name in varying) for d in demos]
    rankings = [rank_texts(texts, "\n".join(q.get(name, "") for name in varying), len(texts), embedder=embedder)
                for q in queries]
    fused = rrf_fuse_indices(rankings)
    ranked = set(fused)
    return [*fused, *(i for i in range(len(demos)) if i not in ranked)]
