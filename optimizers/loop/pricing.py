"""A round's work priced before it runs: LM calls and seconds on this machine.

Seconds come from two things the run knows: the machine's rates for the model (`memtrace doctor`'s, or measured as
the job started: prompt tokens read and reply tokens decoded per second) and the calls it has already watched
(every live LM call of a traced run records its tokens and seconds). The rates price a call from its tokens; the
watched calls calibrate them per predictor (a prefix cache, a grammar and long prompts make a real call faster or
slower than the rates say), and without rates the watched calls' mean seconds price a call alone.

    pricer = Pricer(rates)
    pricer.watch(evaluation)                       # the baseline's calls: each predictor's tokens and seconds
    pricer.local_calls(calls, head_words, "extract.predict")   # re-running recorded calls under a candidate
    pricer.validation("extract.predict")           # a validation after a change to that predictor
    pricer.validated("extract.predict", run)       # what a validation re-ran: the next one is priced by it

A validation after a change to predictor P re-runs P's calls and those of the predictors after it whose inputs
changed: `downstream_share` of their calls, 0.7 until a validation of this run has shown the real share. A change
to an op's settings changes what each of its calls is given, so every later call runs again: all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memtrace_opt.estimate import Rates, words
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.tracing import LMCallEvent, OpEvent

__all__ = ["CallStat", "Price", "Pricer", "call_stats"]

DOWNSTREAM_SHARE = 0.7  # of the later predictors' calls a validation re-runs, until one has been watched
TOKENS_PER_WORD = 1.35  # without rates: a prompt's tokens per whitespace word, about


@dataclass
class CallStat:
    """A predictor's live calls as watched: how many, their seconds and tokens."""

    calls: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, seconds: float, prompt: int, completion: int) -> None:
        self.calls += 1
        self.seconds += seconds
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    @property
    def mean_completion(self) -> float:
        return self.completion_tokens / self.calls if self.calls else 0.0


def call_stats(evaluation: EvalResult) -> dict[str, CallStat]:
    """Each predictor's live LM calls in `evaluation`'s traced runs (a call a cache served is left out)."""
    out: dict[str, CallStat] = {}
    for trace in evaluation.traces.values():
        predictor = {e.call_id: e.predictor for e in trace.events if isinstance(e, OpEvent) and e.predictor}
        for event in trace.events:
            if isinstance(event, LMCallEvent) and not event.cached and not event.error:
                name = predictor.get(event.op_call_id or "")
                if name:
                    out.setdefault(name, CallStat()).add(event.seconds, event.prompt_tokens or 0,
                                                         event.completion_tokens or 0)
    return out


@dataclass(frozen=True)
class Price:
    """What a piece of work costs: LM calls that reach the model and seconds (None: no way to price time)."""

    calls: int = 0
    seconds: float | None = 0.0

    def __add__(self, other: Price) -> Price:
        seconds = None if self.seconds is None or other.seconds is None else self.seconds + other.seconds
        return Price(self.calls + other.calls, seconds)

    def times(self, factor: float) -> Price:
        return Price(math.ceil(self.calls * factor), None if self.seconds is None else self.seconds * factor)


@dataclass
class Pricer:
    """Prices calls of a run's predictors (module doc). `order` is the program's predictors in pipeline order."""

    rates: Rates | None = None
    order: Sequence[str] = ()
    own: dict[str, CallStat] = field(default_factory=dict)  # watched here (or restored from the study)
    memo: Any = None  # a replay memo: the live calls of every traced run it learned (`ReplayMemo.call_stats`)
    proposals: list[tuple[int, float]] = field(default_factory=list)  # each reflection proposal's (calls, seconds)
    val_calls: dict[str, int] = field(default_factory=dict)  # each predictor's calls in the seed's run of the valset
    downstream_share: float = DOWNSTREAM_SHARE
    _shares: list[float] = field(default_factory=list)

    # what the run has watched -------------------------------------------------------------------------------
    @property
    def stats(self) -> dict[str, CallStat]:
        """Each predictor's watched calls: the memo's (every traced run of the optimization, a comparison's
        warm-up included), else those watched here."""
        learned = {name: CallStat(*values) for name, values in (self.memo.call_stats() if self.memo else {}).items()}
        return {**self.own, **{name: stat for name, stat in learned.items() if stat.calls}}

    def watch(self, evaluation: EvalResult, *, valset: bool = False) -> None:
        """Learns each predictor's call seconds and tokens from `evaluation`'s live calls (`valset`: it is the
        seed's run of the valset, which prices every validation)."""
        for name, stat in call_stats(evaluation).items():
            mine = self.own.setdefault(name, CallStat())
            mine.calls, mine.seconds = mine.calls + stat.calls, mine.seconds + stat.seconds
            mine.prompt_tokens += stat.prompt_tokens
            mine.completion_tokens += stat.completion_tokens
        if valset:  # every call of each predictor, served or not: what a change to it makes run again
            self.val_calls = {name: 0 for name in self.order}
            for trace in evaluation.traces.values():
                for event in trace.events:
                    if isinstance(event, OpEvent) and event.predictor in self.val_calls:
                        self.val_calls[event.predictor] += 1

    def stats_dict(self) -> dict[str, dict[str, float]]:
        """The watched calls, JSON-ready (the study keeps the baseline's: a resumed run prices from them)."""
        return {name: {"calls": s.calls, "seconds": round(s.seconds, 3), "prompt_tokens": s.prompt_tokens,
                       "completion_tokens": s.completion_tokens} for name, s in self.stats.items()}

    def restore(self, stats: dict[str, dict[str, float]], val_calls: dict[str, int]) -> None:
        """What a run before this one watched (`stats_dict`) and its valset calls per predictor."""
        for name, data in stats.items():
            self.own[name] = CallStat(int(data.get("calls", 0)), float(data.get("seconds", 0.0)),
                                        int(data.get("prompt_tokens", 0)), int(data.get("completion_tokens", 0)))
        self.val_calls = {name: int(val_calls.get(name, 0)) for name in self.order}

    def validated(self, predictor: str, run: EvalResult, *, settings: bool = False) -> None:
        """What a validation after a change to `predictor` re-ran of the later predictors: their share of the
        seed's valset calls prices the next validation (of a prompt: `settings` re-runs them all, module doc)."""
        if settings:
            self.watch(run)
            return
        later = self._later(predictor)
        seed = sum(self.val_calls.get(name, 0) for name in later)
        if not seed:
            return
        rerun = sum(stat.calls for name, stat in call_stats(run).items() if name in later)
        self._shares.append(min(1.0, rerun / seed))
        self.downstream_share = sum(self._shares) / len(self._shares)
        self.watch(run)

    # prices -----------------------------------------------------------------------------------------------
    def call_seconds(self, prompt_tokens: float, completion_tokens: float, predictor: str = "") -> float | None:
        """One call's seconds: by the rates, scaled by how `predictor`'s watched calls compared with the rates
        (all watched calls where it has none); by the watched calls alone without rates."""
        stat = self.stats.get(predictor)
        if self.rates is None or math.isinf(self.rates.prompt_tps):
            if stat is not None and stat.calls:
                return stat.mean_seconds
            watched = [s for s in self.stats.values() if s.calls]
            return sum(s.seconds for s in watched) / sum(s.calls for s in watched) if watched else None
        return self._by_rates(prompt_tokens, completion_tokens) * self._calibration(predictor)

    def tokens(self, text_words: int) -> float:
        """The tokens of a text of `text_words` whitespace words."""
        return text_words * (self.rates.tokens_per_word if self.rates is not None else TOKENS_PER_WORD)

    def local_calls(self, prompts: Sequence[tuple[str, str]], head_words: int, predictor: str) -> Price:
        """Re-running recorded calls (`prompts`: each its user message and the seed's reply, whose length prices
        the reply) under a candidate whose system message and demos are `head_words` words."""
        seconds = 0.0
        for prompt, reply in prompts:
            call = self.call_seconds(self.tokens(head_words + words([prompt])), self.tokens(words([reply])), predictor)
            if call is None:
                return Price(len(prompts), None)
            seconds += call
        return Price(len(prompts), seconds)

    def validation(self, predictor: str, *, settings: bool = False) -> Price:
        """A validation after a change to `predictor`'s prompt, or to its op's `settings` (module doc); every
        predictor's calls when it is none of the program's (a setting of an op without a prompt changes what all of
        them read)."""
        if not self.val_calls:
            return Price(0, None)
        later = self._later(predictor)
        own = [predictor] if predictor in self.val_calls else list(self.val_calls)
        price = Price(0, 0.0)
        for name in own:
            price += self._seed_calls(name)
        for name in later:
            price += self._seed_calls(name).times(1.0 if settings else self.downstream_share)
        return price

    def reflection(self, slots: int, prompt_words: int, reply_tokens: float) -> Price:
        """The reflection LM proposing `slots` instructions: as many calls and seconds as its proposals took on
        average where the run has watched one (a small model's echoes cost a second attempt), else one and a half
        calls a slot, each priced by the rates."""
        if self.proposals:
            calls = sum(c for c, _ in self.proposals) / len(self.proposals)
            seconds = sum(s for _, s in self.proposals) / len(self.proposals)
            return Price(math.ceil(calls), seconds)
        return self.calls_of("reflection", math.ceil(1.5 * slots), prompt_words, reply_tokens)

    def proposed(self, calls: int, seconds: float) -> None:
        """A reflection proposal took `calls` live calls in `seconds`: the next is priced by it."""
        if calls:
            self.proposals.append((calls, seconds))

    def calls_of(self, predictor: str, count: int, prompt_words: int, reply_tokens: float) -> Price:
        """`count` calls of `predictor` (or of a role: "reflection") with prompts of `prompt_words` words."""
        seconds = self.call_seconds(self.tokens(prompt_words), reply_tokens, predictor)
        return Price(count, None if seconds is None else count * seconds)

    def per_call(self, predictor: str) -> float | None:
        """A watched call of `predictor`, about (None: none watched and no rates to price one)."""
        stat = self.stats.get(predictor)
        if stat is not None and stat.calls:
            return stat.mean_seconds
        watched = [s for s in self.stats.values() if s.calls]
        return sum(s.seconds for s in watched) / sum(s.calls for s in watched) if watched else None

    # ---------------------------------------------------------------------------------------------------
    def _later(self, predictor: str) -> list[str]:
        if predictor not in self.order:
            return []
        return list(self.order[list(self.order).index(predictor) + 1:])

    def _seed_calls(self, name: str) -> Price:
        count = self.val_calls.get(name, 0)
        per = self.per_call(name) if count else 0.0
        return Price(count, None if per is None else count * per)

    def _by_rates(self, prompt_tokens: float, completion_tokens: float) -> float:
        assert self.rates is not None
        return prompt_tokens / self.rates.prompt_tps + completion_tokens / self.rates.decode_tps

    def _calibration(self, predictor: str) -> float:
        """Watched seconds over the rates' seconds for the same calls: `predictor`'s, else every predictor's."""
        chosen = [self.stats[predictor]] if predictor in self.stats and self.stats[predictor].calls else \
            [s for s in self.stats.values() if s.calls]
        by_rates = sum(self._by_rates(s.prompt_tokens, s.completion_tokens) for s in chosen)
        watched = sum(s.seconds for s in chosen)
        return watched / by_rates if by_rates > 0 and watched > 0 else 1.0
