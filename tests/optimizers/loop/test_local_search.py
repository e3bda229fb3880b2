"""The local search: every candidate scored on the chosen predictor's local set, the best validated."""

from __future__ import annotations

import pytest
from optfixtures import BAD_EXTRACT, EXTRACT, make_models

from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer, instructions_of, with_instruction
from memtrace_opt.optimizers.core.program_io import demos_of
from memtrace_opt.optimizers.loop.jobs import RoundJobs
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory
from memtrace_opt.testing import Skill
from memtrace_opt.testing.skills import default_skills

COPY = "Copy every message out in full."


def useless(call):
    return {"new_instruction": "Write short notes about the people. Skip anything about time."}


def copying_rules(call):
    """The reflection LM's rule: copy the messages (the fake extractor then writes each a dozen times)."""
    return {"rules": COPY}


def with_copying_extractor(engine) -> None:
    facts = next(s for s in default_skills() if s.outputs == ("facts",))

    def extract(call):
        if COPY in call.instruction:
            return {"facts": [call.inputs.get("new_messages", "")] * 12}
        return facts.fn(call)

    engine.skills[:] = [Skill(("facts",), extract, name="facts"), *engine.skills]


@pytest.fixture
def windows():
    """The planted Mem0 (no word about dates: the fake extractor drops every dated fact), windows of 2 turns: four
    extraction calls in the toy conversation, each reading some question's evidence."""
    return with_instruction(Mem0Memory(Mem0Config(window_turns=2)), EXTRACT, BAD_EXTRACT)


def loop(models, **values) -> MemTraceOptimizer:
    settings = {"rounds": 1, "candidates": 1, "minibatch": 4, "demos": 1, "min_val_questions": 1, **values}
    return MemTraceOptimizer.from_models(models, settings=LoopSettings.of(**settings), attribution="lineage")


def test_a_planted_fault_is_seen_on_the_local_set_and_fixed_by_a_demo_scored_on_other_calls(windows, examples):
    models, _ = make_models(reflection=useless, rules=lambda call: {"rules": "Be brief."})
    opt = loop(models)
    optimized = opt.compile(windows, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    assert first.chosen_predictor == EXTRACT
    local = first.local_set
    assert local is not None and local["calls"] == 4 and local["seed_carried"] < local["targets"]
    taken = next(c for c in first.candidates if c.accepted)
    assert taken.demos is not None and taken.local is not None
    # scored on the calls it was not made from: its own call is left out, and it fixes others
    assert taken.local["own_calls"] >= 1 and taken.local["calls"] < local["calls"]
    assert taken.local["fixed"] > taken.local["lost"] and taken.val_score > opt.result.baseline_val
    assert instructions_of(optimized) == instructions_of(windows) and demos_of(optimized)[EXTRACT]
    # the candidates that did not beat the seed there were never validated
    assert all(c.val_score is None for c in first.candidates if c.local and c.local["fixed"] <= c.local["lost"])


def test_a_bloated_candidate_is_rejected_on_the_local_set(windows, examples):
    models, engine = make_models(reflection=useless, rules=copying_rules)
    with_copying_extractor(engine)
    opt = loop(models, repairs=0, demos=0)
    opt.compile(windows, trainset=examples, valset=examples)
    copying = next(c for r in opt.result.rounds for c in r.candidates if COPY in c.instruction)
    assert copying.local["bloat"] == copying.local["calls"] and copying.local["carried"] == 0
    assert copying.val_score is None and "rejected by the local objective" in copying.why


class Killed(BaseException):
    """A kill of the process, in the middle of a validation."""


def test_a_resumed_round_re_runs_no_local_call(windows, examples, tmp_path, monkeypatch):
    """A run killed while it validates, resumed with its study and its reply cache: no local call reaches the model
    twice (the cache serves every reply the killed run paid for)."""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    original = RoundJobs.validate
    killed = []

    def dies_once(self, candidate):
        if not killed:
            killed.append(candidate)
            raise Killed()
        return original(self, candidate)

    monkeypatch.setattr(RoundJobs, "validate", dies_once)
    engines = []

    def run():
        models, engine = make_models(reflection=useless, rules=lambda call: {"rules": "Be brief."})
        engines.append(engine)
        opt = MemTraceOptimizer.from_models(models, settings=LoopSettings.of(
            rounds=1, candidates=1, minibatch=4, demos=1, min_val_questions=1), attribution="lineage",
            storage=storage, study_name="local-resume", replies=ReplyCache(tmp_path / "replies.sqlite"))
        opt.compile(windows, trainset=examples, valset=examples)
        return opt

    with pytest.raises(Killed):
        run()
    first = [repr(c.messages) for c in engines[0].calls_for("facts")]
    assert first
    opt = run()
    again = [repr(c.messages) for c in engines[1].calls_for("facts")]
    assert not set(again) & set(first)  # every extraction the killed run paid for came back from the cache
    assert opt.result.rounds[0].accepted and opt.result.cached_calls >= len(set(first)) - 1


def test_without_the_local_objective_the_local_check_and_minibatch_rank(windows, examples):
    models, _ = make_models(reflection=useless, rules=lambda call: {"rules": "Be brief."})
    opt = loop(models, local_objective=False)
    opt.compile(windows, trainset=examples, valset=examples)
    first = opt.result.rounds[0]
    assert first.local_set is not None and first.repairs  # built to confirm the repairs on, ranking nothing
    assert all(c.local is None or "blamed" in c.local for c in first.candidates)
    assert any(c.minibatch_score is not None for c in first.candidates)
    assert all(c.origin != "bootstrapped" for c in first.candidates)
