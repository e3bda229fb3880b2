"""The round as the engine runs it: priced phase by phase, validation reserved, candidates halved, nothing paid twice.

A virtual clock stands in for the machine: every LM call the fake engine answers moves it one second, and every call
is priced at one second, so what the round can afford is the same on every machine."""

from __future__ import annotations

import json
import math

import dspy
import pytest
from optfixtures import EXTRACT, make_models

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.memory.store import MemoryUnit
from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.gates.local_objective import LocalScore
from memtrace_opt.optimizers.loop.allowance import Allowance
from memtrace_opt.optimizers.loop.choice import RUNG_CALLS, LocalSearch, Validation
from memtrace_opt.optimizers.loop.engine import Engine
from memtrace_opt.optimizers.loop.phase_prices import LEAST_SCORED
from memtrace_opt.optimizers.loop.pricing import DOWNSTREAM_SHARE, CallStat, Price, Pricer
from memtrace_opt.programs.mem0 import UpdateDecision
from memtrace_opt.testing import FakeEngine, FakeReply, Skill
from memtrace_opt.testing.skills import default_skills


class VirtualClock:
    """`time` for the budget and the engine: a monotonic clock that moves only when `tick` says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    clock = VirtualClock()
    monkeypatch.setattr("memtrace_opt.optimizers.core.budget.time", clock)
    monkeypatch.setattr("memtrace_opt.optimizers.loop.engine.time.monotonic", clock.monotonic)
    monkeypatch.setattr("memtrace_opt.optimizers.loop.teleprompter.time.monotonic", clock.monotonic)
    monkeypatch.setattr(Pricer, "call_seconds", lambda self, prompt, completion, predictor="": 1.0)
    monkeypatch.setattr(Pricer, "per_call", lambda self, predictor: 1.0)
    return clock


def ticking_models(clock: VirtualClock):
    models, engine = make_models()
    complete = engine.complete

    def one_second_each(request):
        clock.tick()
        return complete(request)

    engine.complete = one_second_each
    return models, engine


def test_a_round_short_of_time_reserves_its_validation_and_still_validates(planted, examples, clock):
    whole_models, _ = ticking_models(clock)
    whole = MemTraceOptimizer.from_models(whole_models, attribution="lineage", settings=LoopSettings.of(
        rounds=1, candidates=2, minibatch=5, min_val_questions=1))
    whole.compile(planted, trainset=examples, valset=examples)
    free = whole.result.rounds[0]
    assert free.accepted and not any(p.skipped for p in free.phases)  # with time to spare, nothing is skipped

    baseline = free.lm_calls_total - free.lm_calls
    validation = next(p for p in free.phases if p.phase.value == "validation")
    # the clock: the baseline, the validation and a little more; the reflection LM and the settings search do not fit
    models, engine = ticking_models(clock)
    short = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=1, candidates=2, minibatch=5, min_val_questions=1,
        time_budget=baseline + validation.estimated_calls + RUNG_CALLS + 3))
    short.compile(planted, trainset=examples, valset=examples)
    assert short.result.interrupted is None and short.result.rounds, "no round was cut: it was planned to fit"
    first = short.result.rounds[0]
    phases = {p.phase.value: p for p in first.phases}
    assert "left" in phases["proposals"].skipped and phases["proposals"].calls == 0  # no reflection call
    assert not engine.calls_for("new_instruction") and not engine.calls_for("rules")
    assert phases["validation"].calls > 0 and any(c.val_score is not None for c in first.candidates)
    assert first.accepted  # a repair or bootstrapped demos, which cost no reflection call, still fixed it


class CreepingClock(VirtualClock):
    """A virtual clock that, like a real one, has moved a little every time it is read."""

    def monotonic(self) -> float:
        self.now += 1e-6
        return self.now


@pytest.mark.parametrize(("rounds", "limit", "amount"), [(6, "budget", 300), (16, "budget", 120), (16, "time_budget", 120)])
def test_the_repairs_before_them_never_starve_the_reflection_lms_proposals(planted, examples, clock, monkeypatch,
                                                                          rounds, limit, amount):
    """A round's share is widened to the least that tells anything (its validation, a first rung, the reflection
    LM's proposals), but the repairs it confirms first spend from that share: the proposals' own check must not find
    the rest short, by calls or by seconds (the clock has moved since the share was widened). With 16 rounds of 120
    calls or seconds and a patience of 16, every round's share is the widened least."""
    creeping = CreepingClock()
    monkeypatch.setattr("memtrace_opt.optimizers.core.budget.time", creeping)
    monkeypatch.setattr("time.monotonic", creeping.monotonic)  # the engine's, the teleprompter's, the allowance's
    models, engine = ticking_models(creeping)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=rounds, candidates=2, minibatch=5, min_val_questions=1, min_val_gain=0.9, patience=rounds,
        **{limit: amount}))
    opt.compile(planted, trainset=examples, valset=examples)
    assert len(opt.result.rounds) >= 2
    for record in opt.result.rounds:  # none accepted (the gain asked for is out of reach): every round proposes
        phases = {p.phase.value: p for p in record.phases}
        assert phases["repairs"].calls > 0 or record.round > 1  # the repairs ran first and spent from the share
        assert "ReflectiveSource" not in phases["proposals"].skipped
        assert any(c.origin == "reflection" for c in record.candidates)
    assert engine.calls_for("new_instruction") and opt.result.lm_calls <= amount


@pytest.mark.parametrize("limit", ["budget", "time_budget"])
def test_a_rounds_share_is_the_rest_over_the_rounds_the_plateau_still_allows(planted, examples, clock, monkeypatch,
                                                                            limit):
    """A round limit of 30 does not starve the rounds a patience of 2 allows: the first round's share is half of
    what is left, the second's (nothing accepted before it) all of it, by calls and by seconds alike."""
    shares: list[tuple[float, float]] = []  # (the round's share, what was left of the budget or the clock)
    made = Engine._allowance

    def watched(self, number):
        allowance = made(self, number)
        if limit == "budget":
            shares.append((allowance.calls, self.budget.left()))
        else:
            shares.append((allowance.seconds, self.budget.deadline - self.budget.now()))
        return allowance

    monkeypatch.setattr(Engine, "_allowance", watched)
    models, _ = ticking_models(clock)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=30, candidates=2, minibatch=5, min_val_questions=1, min_val_gain=0.9, patience=2, **{limit: 3000}))
    opt.compile(planted, trainset=examples, valset=examples)
    assert [r.accepted for r in opt.result.rounds] == [False, False]  # the plateau ended it
    (first, left_first), (second, left_second) = shares
    assert first == pytest.approx(math.ceil(left_first / 2) if limit == "budget" else left_first / 2)
    assert second == pytest.approx(left_second) and left_second < left_first


def test_reaching_for_the_least_a_round_needs_stays_inside_the_budget(clock):
    budget = LMBudget(UsageTracker(), limit=50)
    allowance = Allowance(budget, calls=10, seconds=None, start_calls=0, reserve=Price(5, 5.0))
    allowance.reach(Price(20, 20.0))
    assert allowance.calls == 25 and not allowance.shortfall(Price(20, 20.0))  # the share widened to the need
    allowance.reach(Price(60, 60.0))
    assert allowance.shortfall(Price(60, 60.0)) == "50 LM calls left to the round, it needs 65"  # the budget binds


def test_a_round_share_is_spent_by_the_replies_a_resumed_run_charges_again(clock):
    usage = UsageTracker()
    budget = LMBudget(usage, limit=50).run_for(100.0)
    allowance = Allowance(budget, calls=None, seconds=40.0, start_calls=0)
    assert not allowance.shortfall(Price(1, 30.0))
    usage.record("task", prompt_tokens=10, completion_tokens=2, seconds=25.0, replayed=True)  # paid in a sitting before
    assert allowance.shortfall(Price(1, 30.0)) == "15 s left to the round, it needs about 30 s"  # no wall time passed
    usage.record("task", seconds=80.0, replayed=True)
    assert budget.out_of_time() and allowance.shortfall(Price(1, 1.0)) == "the time budget is spent"


class _Trials:
    """The narrow interface a choice policy sees, scripted: each candidate's net gain on any number of calls."""

    def __init__(self, gains: list[int], local_size: int = 16, affords: int | None = None) -> None:
        self.candidates = [Candidate.of(EXTRACT, f"instruction {i}") for i in range(len(gains))]
        self.gains = dict(zip((c.instruction for c in self.candidates), gains, strict=True))
        self.local_size, self.margin, self.validate_top, self.cut = local_size, 1, 2, ""
        self.rungs: list[tuple[int, int]] = []  # (candidates scored, calls each)
        self.validated: list[str] = []
        self.affords = affords  # local calls the round can pay for (None: any)

    def local(self, candidates, first):
        self.rungs.append((len(candidates), first))
        return [LocalScore(first, 0, 0, max(0, self.gains[c.instruction]), max(0, -self.gains[c.instruction]), 0,
                           first) for c in candidates]

    def local_price(self, candidates, first):
        return Price(len(candidates) * first, float(len(candidates) * first))

    def fits(self, price):
        return self.affords is None or price.calls <= self.affords

    def shortfall(self, price):
        return "" if self.fits(price) else "too few calls"

    def validate(self, candidate):
        self.validated.append(candidate.instruction)
        return Validation(0.9)

    def decide(self, accuracy):
        return Decision.of(Status.ACCEPTED, "accepted")


def test_a_candidate_is_dropped_at_the_first_halving_and_the_best_goes_to_validation():
    trials = _Trials([0, 3, -1, 1, 2, 0])
    choice = LocalSearch(trials).choose()
    assert trials.rungs == [(6, RUNG_CALLS), (3, 2 * RUNG_CALLS), (2, 4 * RUNG_CALLS)]  # halving, calls doubling
    by_text = {r.instruction: r for r in choice.records}
    dropped = by_text["instruction 2"]
    assert dropped.status == "outranked" and dropped.why.startswith("dropped at rung 1") and len(dropped.rungs) == 1
    assert trials.validated == ["instruction 1"] and choice.taken is not None  # the first to beat the seed, taken
    assert by_text["instruction 4"].why == "not validated: candidate 2 was accepted first"


def test_a_first_rung_the_round_cannot_afford_for_every_candidate_takes_the_first_ones():
    trials = _Trials([0, 3, -1, 1, 2, 0], affords=3 * RUNG_CALLS)
    choice = LocalSearch(trials).choose()
    assert trials.rungs[0] == (3, RUNG_CALLS)  # three of six: what the round could pay for, in the plan's order
    later = {r.instruction: r for r in choice.records}["instruction 4"]
    assert later.status == "outranked" and later.why.startswith("not scored: the round affords the first rung for 3")
    assert trials.validated == ["instruction 1"]


def test_a_cache_hit_for_a_call_whose_memories_were_renumbered_but_whose_prompt_is_unchanged():
    """The replay memo keys an op call by its inputs, unit ids included; the model sees the memories numbered "0",
    "1", ... So the same memories under other unit ids miss the memo and hit the reply cache: one model call."""
    seen = []

    def decide(call):
        seen.append(call)
        raise FakeReply('[[ ## memory_actions ## ]]\n[{"event": "UPDATE", "id": "0", "text": "Tove rows on Sundays."}]'
                        "\n\n[[ ## completed ## ]]")

    engine = FakeEngine(skills=[Skill(("memory_actions",), decide), *default_skills()])
    models = Models(ModelRoles(task=ModelSpec("fake")), fake_engine=engine)
    models.use_replies(ReplyCache())
    op = UpdateDecision()
    facts = ["Tove rows on Sundays."]
    before = [MemoryUnit("u3", 1, "Tove rows on Saturdays.")]
    renumbered = [MemoryUnit("u4", 1, "Tove rows on Saturdays.")]  # one fact added before it: its unit id moved
    assert op.content_key({"facts": facts, "memories": before}) != op.content_key({"facts": facts, "memories": renumbered})
    with dspy.context(lm=models.task):
        first, second = op(facts=facts, memories=before), op(facts=facts, memories=renumbered)
    assert len(seen) == 1 and models.usage.snapshot()["task"].cache_hits == 1
    assert first.memory_actions[0]["unit_id"] == "u3" and second.memory_actions[0]["unit_id"] == "u4"


def test_two_rows_from_one_snapshot_score_the_seed_identically_with_no_live_call(tmp_path):
    from optfixtures import make_models as models_of
    from toydata import write_locomo

    from memtrace_opt.optimizers.comparison.compare import CompareRequest, compare_optimizers

    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    models, engine = models_of()
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("memtrace", "memtrace_nopatterns"), budget=0,
                             attribution="lineage", loop=LoopSettings.of(candidates=2, minibatch=5, repairs=0))
    summary = compare_optimizers(request, models=models)
    first, second = summary.rows
    assert first.details["baseline"] == second.details["baseline"]  # the seed's validation score, the same
    assert first.lm_calls == second.lm_calls == 0  # served by the warm-up's snapshot: no call reached the model
    written = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [row["lm_calls"] for row in written["rows"]] == [0, 0]
    assert (tmp_path / "cmp" / "replies" / "warm-up.sqlite").is_file()


def test_a_validation_after_a_settings_change_prices_every_later_call():
    pricer = Pricer(order=["a.predict", "b.predict", "c.predict"], val_calls={"a.predict": 4, "b.predict": 10,
                                                                               "c.predict": 20})
    pricer.own = {name: CallStat(1, 2.0) for name in pricer.order}
    prompt = pricer.validation("b.predict")
    settings = pricer.validation("b.predict", settings=True)
    assert prompt.calls == 10 + math.ceil(20 * DOWNSTREAM_SHARE)  # a prompt's change: a share of the later calls
    assert settings == Price(30, 60.0)  # its op's settings: what every later call is given changes


@pytest.mark.parametrize("limit", ["budget", "time_budget"])
def test_without_the_local_objective_a_rounds_least_pays_for_a_candidate_on_the_minibatch(planted, examples, clock,
                                                                                       limit):
    """`--no-local-objective` scores candidates on the minibatch, which costs more than a first rung of the local
    set: the least a round needs is priced by the objective it scores on, so a round whose share is that least
    still scores `LEAST_SCORED` candidates, or all it has (with 8 rounds of 60 calls or seconds and a patience of 8,
    every round's share is the widened least). Priced by the first rung, the minibatch paid for one candidate of four."""
    models, _ = ticking_models(clock)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=8, candidates=2, minibatch=5, min_val_questions=1, min_val_gain=0.9, patience=8,
        local_objective=False, **{limit: 60}))
    opt.compile(planted, trainset=examples, valset=examples)
    assert len(opt.result.rounds) >= 2
    for record in opt.result.rounds:
        scored = [c for c in record.candidates if not c.why.startswith("not scored")]  # scored, or the check said
        proposed = [c for c in record.candidates if c.origin != "combined"]
        assert len(scored) >= min(LEAST_SCORED, len(proposed)), [(c.origin, c.why) for c in record.candidates]


def test_a_candidate_left_unscored_is_said_in_the_log_as_the_round_ends(planted, examples, clock, monkeypatch, caplog):
    monkeypatch.setattr("memtrace_opt.optimizers.loop.phase_prices.LEAST_SCORED", 0)  # the least pays for no scoring
    models, _ = ticking_models(clock)
    opt = MemTraceOptimizer.from_models(models, attribution="lineage", settings=LoopSettings.of(
        rounds=8, candidates=2, minibatch=5, min_val_questions=1, min_val_gain=0.9, patience=8,
        local_objective=False, budget=60))
    with caplog.at_level("INFO", logger="memtrace_opt.optimizers.loop.engine"):
        opt.compile(planted, trainset=examples, valset=examples)
    unscored = [(r.round, c.why) for r in opt.result.rounds for c in r.candidates if c.status == "not_validated"]
    assert unscored and all(f"round {n}: candidate" in caplog.text and why in caplog.text for n, why in unscored)
