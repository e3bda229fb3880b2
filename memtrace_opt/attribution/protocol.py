"""The attributor seam, the registry of methods by name, and the runner over many failed cases.

    verdicts = attribute_cases(cases, "graphtrace", lm=attributor_lm)
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import dspy
import networkx as nx

from memtrace_opt.attribution._graph import GraphView, load_case_graph
from memtrace_opt.attribution._meter import Meter, metering
from memtrace_opt.attribution._types import Cost, FailedCase, Verdict
from memtrace_opt.errors import ConfigError

__all__ = [
    "AttributionConfig",
    "Attributor",
    "LM_FREE_METHODS",
    "JUDGED_METHODS",
    "REPLAY_METHODS",
    "attribute_case",
    "attribute_cases",
    "get_attributor",
    "method_names",
    "make_verdict",
    "register_method",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttributionConfig:
    """Knobs shared by the methods.

    `pseudo_k` turns of pseudo-evidence when a case has no gold evidence (fused from `embedder`'s dense
    ranking and BM25); `frontier` candidate ops at most; `max_lm_calls` and `max_tokens` the per-case budget
    of the LM methods; `op_chars` the size of one rendered op; `log_chars` the size of a flat op log;
    `seed` for the random baseline; `max_replays` replays with a repaired op per case (counterfactual, and
    graphtrace's confirmation; the unchanged replay that checks the failure reproduces is not counted);
    `confirm`: graphtrace confirms a verdict on an upstream op by replaying its repair where the case can be
    replayed (`--no-confirm` turns it off); `check_gold`: graphtrace's last question to the attributor LM, whether
    the evidence supports the gold answer; `judge_evidence`: given a judge, the methods also ask it whether the
    gold evidence turns say the gold answer, a GoldError when they do not (`_gold.py`'s first test; off unless
    asked, `--judge-evidence`: a small judge reads an answer the turns imply as not said).
    """

    embedder: str = "minilm"
    pseudo_k: int = 8
    frontier: int = 16
    max_lm_calls: int = 8
    max_tokens: int = 12_000
    op_chars: int = 2400
    log_chars: int = 12_000
    seed: int = 0
    max_replays: int = 4
    check_gold: bool = True
    confirm: bool = True
    judge_evidence: bool = False


@runtime_checkable
class Attributor(Protocol):
    """Finds the root cause of one failed case in its evolution graph.

    Contract:
    - `attribute(case, graph)` returns a `Verdict` whose `case_id` is `case.case_id` and whose `method` is
      `self.name`; `op_id` names an op node of `graph` (or is None for GoldError / no verdict).
    - It never raises for one case: anything that stops it (no answer op, a malformed graph, an LM that
      keeps failing) comes back as a verdict with `error` set (see `Verdict.failed`).
    - It never mutates `graph`, and keeps no state between cases that changes later verdicts (so cases
      may run in any order, in several threads).
    - LM calls go through `dspy.settings.lm` (the caller scopes it), so the runner can meter them; costs in
      the returned verdict may be left zero: the runner fills them in.
    """

    @property
    def name(self) -> str: ...

    def attribute(self, case: FailedCase, graph: nx.MultiDiGraph) -> Verdict: ...


AttributorFactory = Callable[..., Attributor]
#: Methods that never call an LM (callers need not build an attributor model for them).
LM_FREE_METHODS = frozenset({"lineage", "random", "blame_response"})
#: Methods that replay a case when given a `replay_provider` option (counterfactual always; graphtrace to confirm).
REPLAY_METHODS = frozenset({"graphtrace", "counterfactual"})
#: Methods that take the judge role as a `judge` option (an `AnswerJudge`, for their GoldError tests).
JUDGED_METHODS = frozenset({"lineage", "graphtrace", "counterfactual"})
_METHODS: dict[str, AttributorFactory] = {}
_BUILTIN_MODULES = (
    "memtrace_opt.attribution.lineage",
    "memtrace_opt.attribution.graphtrace",
    "memtrace_opt.attribution.counterfactual",
    "memtrace_opt.attribution.baselines",
)


def register_method(name: str) -> Callable[[AttributorFactory], AttributorFactory]:
    """Class decorator: make an attributor selectable by `name`. Factories take (config, **options)."""

    def register(factory: AttributorFactory) -> AttributorFactory:
        _METHODS[name] = factory
        return factory

    return register


def _load_builtins() -> None:
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def method_names() -> tuple[str, ...]:
    _load_builtins()
    return tuple(_METHODS)


def get_attributor(name: str, config: AttributionConfig | None = None, **options: Any) -> Attributor:
    """The attributor registered as `name`. Raises ConfigError for an unknown name."""
    _load_builtins()
    factory = _METHODS.get(name)
    if factory is None:
        raise ConfigError(f"unknown attribution method {name!r}; choose one of {', '.join(_METHODS)}")
    return factory(config or AttributionConfig(), **options)


def make_verdict(
    case: FailedCase,
    method: str,
    view: GraphView,
    op: str | None,
    error_type: str | None,
    reason: str,
    confidence: float,
) -> Verdict:
    """A verdict naming `op` (an op node id), with its op name and predictor read from the graph."""
    if op is not None and not view.is_op(op):
        op = None
    return Verdict(
        case_id=case.case_id,
        method=method,
        error_type=error_type,
        op_id=op,
        op=view.op_name(op) if op else None,
        predictor=view.predictor(op) if op else None,
        reason=" ".join(str(reason).split())[:1000],
        confidence=max(0.0, min(1.0, float(confidence))),
    )


class _GraphCache:
    """The last few graphs read from disk (cases of one conversation share one graph)."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._graphs: OrderedDict[str, nx.MultiDiGraph] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str | Path) -> nx.MultiDiGraph:
        key = str(Path(path).resolve())
        with self._lock:
            if key in self._graphs:
                self._graphs.move_to_end(key)
                return self._graphs[key]
        graph = load_case_graph(path)
        with self._lock:
            self._graphs[key] = graph
            while len(self._graphs) > self._size:
                self._graphs.popitem(last=False)
        return graph


def _case_cost(meter: Meter, reported: Cost, seconds: float) -> Cost:
    """The case's cost from what was metered around it (every call) and what the method reported: the replays it
    metered itself (`reported.replay_*`) are taken out of the attributor's part and kept apart."""
    cost = Cost(
        lm_calls=max(0, meter.calls - reported.replay_calls),
        prompt_tokens=max(0, meter.prompt_tokens - reported.replay_prompt_tokens),
        completion_tokens=max(0, meter.completion_tokens - reported.replay_completion_tokens),
        seconds=seconds,
        replay_calls=reported.replay_calls,
        replay_prompt_tokens=reported.replay_prompt_tokens,
        replay_completion_tokens=reported.replay_completion_tokens,
    )
    if reported.lm_calls > cost.lm_calls:  # the method metered more than we saw (e.g. cached calls)
        cost = replace(reported, seconds=seconds)
    return cost


def attribute_case(attributor: Attributor, case: FailedCase, *, graphs: _GraphCache | None = None) -> Verdict:
    """Attribute one case, metering its LM use (every call, cache hits included; the tokens of uncached
    calls) and time, the attributor's questions apart from the task model's replays (`Cost`). Never raises."""
    start = time.perf_counter()
    method = getattr(attributor, "name", type(attributor).__name__)
    with metering() as meter:
        try:
            graph = case.graph
            if graph is None:
                if case.graph_path is None:
                    raise ValueError("the case names no graph")
                graph = (graphs or _GraphCache(1)).get(case.graph_path)
            verdict = attributor.attribute(case, graph)
        except Exception as error:  # noqa: BLE001 - one failed case never stops the others
            log.warning("attribution of %s failed: %s: %s", case.case_id, type(error).__name__, error)
            verdict = Verdict.failed(case.case_id, method, f"{type(error).__name__}: {error}")
    return replace(verdict, cost=_case_cost(meter, verdict.cost, time.perf_counter() - start))


ProgressFn = Callable[[int, int, Verdict], None]


def attribute_cases(
    cases: Iterable[FailedCase],
    method: str | Attributor,
    *,
    lm: Any = None,
    config: AttributionConfig | None = None,
    progress: ProgressFn | None = None,
    num_threads: int = 1,
    **options: Any,
) -> list[Verdict]:
    """Attribute every case with `method` (a registered name or an Attributor), in input order.

    `lm` (a dspy.LM) is the attributor model for LM-backed methods, scoped to this call; `progress(done,
    total, verdict)` is called as each case finishes (from worker threads when `num_threads > 1`).
    A case that fails comes back as a verdict with `error` set; the others go on.
    """
    attributor = method if not isinstance(method, str) else get_attributor(method, config, **options)
    todo: Sequence[FailedCase] = list(cases)
    graphs = _GraphCache()
    results: list[Verdict | None] = [None] * len(todo)
    done = 0
    lock = threading.Lock()

    def run(index: int) -> None:
        nonlocal done
        verdict = attribute_case(attributor, todo[index], graphs=graphs)
        with lock:
            results[index] = verdict
            done += 1
            count = done
        if progress is not None:
            progress(count, len(todo), verdict)

    with dspy.context(lm=lm) if lm is not None else contextlib.nullcontext():
        if num_threads <= 1 or len(todo) <= 1:
            for index in range(len(todo)):
                run(index)
        else:
            with ThreadPoolExecutor(max_workers=num_threads) as pool:
                futures = [pool.submit(contextvars.copy_context().run, run, i) for i in range(len(todo))]
                for future in futures:
                    future.result()
    return [v for v in results if v is not None]

