"""The engine's levers on the real embedded model (marked `embedded`; a few short calls)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import dspy
import pytest

from memtrace_opt.lm import embedded
from memtrace_opt.lm.embedded import EmbeddedEngine, EngineLevers

pytestmark = pytest.mark.embedded

STORY = ("Maya moved to Denver in March 2023 and started a job at the children's hospital. Her brother Theo "
         "adopted a beagle named Biscuit, and the two of them are planning a trip to Japan in June.")


def _request(system: str, user: str, max_tokens: int = 24) -> SimpleNamespace:
    return SimpleNamespace(system=None, messages=[SimpleNamespace(role="system", text=system),
                                                  SimpleNamespace(role="user", text=user)],
                           config=SimpleNamespace(temperature=0.0, max_tokens=max_tokens, seed=None, top_p=None, stop=()))


FIRST = "You answer questions about this text in a few words.\n" + STORY * 3
SECOND = "You list the people named in a text, comma-separated.\n" + STORY
CALLS = [(FIRST, "Where does Maya live?"), (SECOND, "Who is named?"), (FIRST, "What is the dog called?")]


def test_the_prefix_cache_gives_the_completions_of_a_fresh_context_and_rereads_less():
    levers = EngineLevers()
    fresh = EmbeddedEngine(levers=dataclasses.replace(levers, prefix_cache_mb=0), record_stats=True)
    plain = []
    for system, user in CALLS:
        fresh.loaded().llama.reset()  # nothing kept: every prompt evaluated from its first token
        plain.append(fresh.complete(_request(system, user)).message.text or "")
    cached_engine = EmbeddedEngine(levers=levers, record_stats=True)
    cached = [cached_engine.complete(_request(system, user)).message.text or "" for system, user in CALLS]
    assert cached == plain
    assert fresh.stats is not None and cached_engine.stats is not None
    # the third call shares the first call's system prompt, with another call in between
    assert cached_engine.stats[2].cached_tokens >= 128
    assert cached_engine.stats[2].prefill_tokens < fresh.stats[2].prefill_tokens
    embedded._LOADED.clear()


def test_grammar_bound_replies_always_parse():
    engine = EmbeddedEngine(levers=EngineLevers(prefix_cache_mb=0), record_stats=True)
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False, max_tokens=96, num_retries=0)
    signature = dspy.Signature("text -> facts: list[str], about_a_pet: bool", "List the facts in the text.")
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        out = dspy.Predict(signature)(text=STORY)
    assert isinstance(out.facts, list) and all(isinstance(f, str) for f in out.facts)
    assert isinstance(out.about_a_pet, bool)
    assert engine.stats and engine.stats[-1].grammar and engine.stats[-1].finish_reason == "stop"
    embedded._LOADED.clear()


def test_checking_the_grammar_on_the_greedy_token_picks_what_masking_every_candidate_picks():
    engine = EmbeddedEngine(levers=EngineLevers(prefix_cache_mb=0), record_stats=True)
    lm = dspy.LM(engine.lm_name, engine=engine, cache=False, max_tokens=96, num_retries=0)
    signature = dspy.Signature("text -> people: list[str], count: int", "Name the people in the text.")
    llama = engine.loaded().llama
    replies = []
    for greedy in (True, False):
        llama.greedy_grammar = greedy
        llama.reset()
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            out = dspy.Predict(signature)(text=STORY)
        assert engine.stats is not None
        replies.append((out.people, out.count, engine.stats[-1].completion_tokens))
    llama.greedy_grammar = True
    assert replies[0] == replies[1]
    embedded._LOADED.clear()
