"""Workers sharing one optimization through its Optuna storage.

Several `memtrace optimize` processes given the same `--storage` URL (and the same setup, hence the same study
name) share one optimization. Beside the study (one trial per candidate, `study.py`) they use a side study,
`NAME~crew`, whose trials are of three kinds (user attribute `kind`):

- `lead`: who decides a phase (`baseline`, `round-N`). A worker becomes the leader by claiming the first
  WAITING `lead` trial of the phase (`_claim_waiting`: one conditional UPDATE) and holds it RUNNING, with
  heartbeats, until the phase's outcome is in the study; a leader that dies is failed by the heartbeat and
  the next worker to look takes over (the round resumes from what the study holds).
- `job`: one piece of work the leader needs (a failure's attribution, a candidate's local check and minibatch,
  one conversation's share of a validation or of the baseline: `conversation_share`). The leader
  enqueues each as a WAITING trial; every worker, the leader too, claims them one at a time, so a job runs
  once. The worker records itself (`worker`: host and pid), runs it, and ends it COMPLETE with its `result`.
  A job whose worker was killed is failed by the heartbeat and enqueued again.
- `memo`: what a worker's replay memo learned outside a job (the baseline, a round's traced minibatch).

Every finished job and memo trial carries the memo entries its worker learned (`ReplayMemo.export`); every
worker merges the others' before it plans or claims, so a candidate replays the same recorded calls on
whichever worker runs it. Each worker publishes its LM-call spend (`lm_calls:WORKER`); the budget counts all.

Killed-worker recovery needs heartbeats, which Optuna keeps only in a database storage (SQLite, PostgreSQL,
MySQL); on a journal storage the workers share the work, but a killed one's job is never run again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import optuna
import sqlalchemy
from optuna.trial import TrialState, create_trial

from memtrace_opt.errors import MemtraceError
from memtrace_opt.optimizers.core.budget import BudgetExhausted
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo
from memtrace_opt.optimizers.loop import keys
from memtrace_opt.optimizers.loop.study import heartbeat_seconds

__all__ = ["Crew", "Job", "Lead", "conversation_share", "conversations", "joined_accuracy", "worker_name"]

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a job that raised this many times stops the optimization with its error
SPEND_SECONDS = 2.0  # the others' LM-call spend is re-read at most this often


def _claim_waiting(storage: Any, trial_id: int) -> bool:
    """WAITING -> RUNNING, True for exactly one of the workers that try at once. Optuna's own claim reads the
    state with SELECT ... FOR UPDATE, which SQLite ignores: two processes could both read WAITING and both win.
    On a database storage the claim is one conditional UPDATE instead, atomic on every database."""
    backend = getattr(storage, "_backend", storage)
    if not isinstance(backend, optuna.storages.RDBStorage):
        return bool(storage.set_trial_state_values(trial_id, TrialState.RUNNING))
    from optuna.storages._rdb.models import TrialModel

    claim = (sqlalchemy.update(TrialModel)
             .where(TrialModel.trial_id == trial_id, TrialModel.state == TrialState.WAITING)
             .values(state=TrialState.RUNNING, datetime_start=datetime.now()))
    with backend.engine.begin() as connection:
        return connection.execute(claim).rowcount == 1


def conversations(cases: Sequence[Any]) -> list[str]:
    """The conversations of an evaluation's cases, in the order their shares are enqueued."""
    return sorted({case.conversation_key for case in cases})


def conversation_share(evaluator: Any, program: Any, cases: Sequence[Any], conversation: str) -> tuple[Any, dict[str, Any]]:
    """One conversation's share of an evaluation of `program` on `cases` (a job a worker runs): the result, and
    its count of `correct` among `cases` (`joined_accuracy` adds the shares up)."""
    result = evaluator.evaluate(program, [case for case in cases if case.conversation_key == conversation])
    return result, {"correct": sum(c.correct for c in result.cases), "cases": len(result.cases), "score": result.accuracy}


def joined_accuracy(shares: Sequence[Mapping[str, Any]]) -> float:
    """The accuracy of a whole evaluation from its conversations' shares: what one run over every case gives."""
    cases = sum(int(share["cases"]) for share in shares)
    return sum(int(share["correct"]) for share in shares) / cases if cases else 0.0


def worker_name() -> str:
    """This process as the `worker` user attribute names it: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Job:
    """One evaluation the leader needs: `key` names it (unique in the study), `attrs` say what to run."""

    key: str
    attrs: Mapping[str, Any]


@dataclass
class Lead:
    """A phase this worker leads; `undecided()` when it stops before deciding it (a budget, a clock)."""

    decided: bool = True

    def undecided(self) -> None:
        self.decided = False


@dataclass
class _Beats:
    """One thread sending the heartbeats of every trial this worker holds RUNNING."""

    storage: Any
    interval: float
    ids: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def add(self, trial_id: int) -> None:
        self._send(trial_id)
        with self.lock:
            self.ids.add(trial_id)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="memtrace-heartbeats", daemon=True)
                self.thread.start()

    def discard(self, trial_id: int) -> None:
        with self.lock:
            self.ids.discard(trial_id)

    def _send(self, trial_id: int) -> None:
        try:
            self.storage.record_heartbeat(trial_id)
        except Exception:  # noqa: BLE001 - a missed heartbeat only risks the trial being failed as stale
            log.debug("heartbeat for trial %s failed", trial_id, exc_info=True)

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            with self.lock:
                ids = list(self.ids)
            for trial_id in ids:
                self._send(trial_id)


class Crew:
    """This worker's view of the workers sharing a study (see the module docstring); the round's `Runner` when
    workers share it (`runner.py`)."""

    shared = True

    def __init__(self, study: optuna.Study, memo: ReplayMemo, *, worker: str | None = None,
                 poll_seconds: float = 0.25) -> None:
        self.storage: Any = study._storage
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.study = optuna.create_study(study_name=f"{study.study_name}~crew", storage=self.storage,
                                             direction="maximize", load_if_exists=True)
        self.study_id = self.study._study_id
        self.memo = memo
        self.worker = worker or worker_name()
        self.poll_seconds = poll_seconds
        interval = heartbeat_seconds(self.storage)
        self.heartbeats = interval is not None
        self._beats = _Beats(self.storage, float(interval or 1))
        self._published = memo.mark()
        self._merged: set[int] = set()
        self._finished_seen = -1
        self._spend_start = self._spends()
        self._others: tuple[float, int] = (0.0, 0)
        self.spend: Callable[[], int] | None = None  # this worker's own metered LM calls, reported after each job

    # trials ---------------------------------------------------------------------------------------------
    def _trials(self, kind: str, states: Sequence[TrialState] | None = None) -> list[optuna.trial.FrozenTrial]:
        found = self.storage.get_all_trials(self.study_id, deepcopy=False, states=tuple(states) if states else None)
        return [t for t in found if t.user_attrs.get("kind") == kind]

    def _create(self, state: TrialState, attrs: Mapping[str, Any]) -> int:
        template = create_trial(state=state, user_attrs=dict(attrs))
        return int(self.storage.create_new_trial(self.study_id, template_trial=template))

    def _claim(self, trial_id: int) -> bool:
        """The atomic WAITING -> RUNNING claim; a claimed trial is this worker's, with heartbeats."""
        if not _claim_waiting(self.storage, trial_id):
            return False
        if self.heartbeats:
            self._beats.add(trial_id)
        self.storage.set_trial_user_attr(trial_id, "worker", self.worker)
        return True

    def _end(self, trial_id: int, state: TrialState, value: float = 0.0, **attrs: Any) -> None:
        self._beats.discard(trial_id)
        values = [value] if state == TrialState.COMPLETE else None
        try:
            for name, attr in attrs.items():
                self.storage.set_trial_user_attr(trial_id, name, attr)
            self.storage.set_trial_state_values(trial_id, state, values=values)
        except optuna.exceptions.UpdateFinishedTrialError:  # failed as stale meanwhile: it runs again elsewhere
            log.warning("trial %d was failed as stale before %s finished it", trial_id, self.worker)

    def _fail_stale(self) -> None:
        if self.heartbeats:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(self.study)

    # leaders --------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lead(self, phase: str) -> Iterator[Lead | None]:
        """Yields a `Lead` while this worker leads `phase`, None when another live worker leads it or has decided
        it. The lead ends COMPLETE (the phase is decided), PRUNED (`Lead.undecided`: stopped before deciding, a
        later run leads it again) or FAIL (the block raised)."""
        self._fail_stale()
        trial_id = self._elect(phase)
        if trial_id is None:
            yield None
            return
        log.info("%s leads %s", self.worker, phase)
        lead = Lead()
        try:
            yield lead
        except BaseException:
            self._end(trial_id, TrialState.FAIL)
            raise
        self._end(trial_id, TrialState.COMPLETE if lead.decided else TrialState.PRUNED)

    def _elect(self, phase: str) -> int | None:
        for _ in range(2):
            trials = sorted((t for t in self._trials("lead") if t.user_attrs.get("phase") == phase
                             and t.state not in (TrialState.FAIL, TrialState.PRUNED)), key=lambda t: t.number)
            if not trials:
                self._create(TrialState.WAITING, {"kind": "lead", "phase": phase})
                continue
            first = trials[0]  # the only one claimable: two workers that enqueued at once agree on it
            if first.state != TrialState.WAITING or not self._claim(first._trial_id):
                return None
            return int(first._trial_id)
        return None

    def _lead_states(self, phase: str) -> set[TrialState]:
        self._fail_stale()
        return {t.state for t in self._trials("lead") if t.user_attrs.get("phase") == phase}

    def leading(self, phase: str) -> bool:
        """Whether a live worker leads `phase` now."""
        return TrialState.RUNNING in self._lead_states(phase)

    def led(self, phase: str) -> bool:
        """Whether a live worker leads `phase` or has decided it (False: the next to look takes over)."""
        return bool(self._lead_states(phase) & {TrialState.RUNNING, TrialState.COMPLETE})

    def follow(self, phase: str, done: Callable[[], bool], accept: Callable[[Mapping[str, Any]], bool],
               execute: Callable[[Mapping[str, Any]], dict[str, Any]]) -> bool:
        """Run the jobs `accept` takes until `done()`: True then; False as soon as no live worker leads `phase`."""
        while not done():
            self.pull()
            if self.work(accept, execute):
                continue
            if not self.led(phase):
                return False
            time.sleep(self.poll_seconds)
        return True

    # jobs -----------------------------------------------------------------------------------------------
    def run(self, jobs: Sequence[Job], execute: Callable[[Mapping[str, Any]], dict[str, Any]],
            done: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, dict[str, Any]]:
        """Every job's result (by key), each run once by whichever worker claims it, this one included; `done(key,
        result)` is called as each result comes in (`runner.py`). A job whose worker died is enqueued again; one
        that raised `ATTEMPTS` times raises here. A job cut by the budget has the result `{"budget": why}`."""
        wanted = {job.key: job for job in jobs}
        results: dict[str, dict[str, Any]] = {}
        enqueued: set[int] = set()
        while True:
            self._fail_stale()
            by_key: dict[str, list[optuna.trial.FrozenTrial]] = {}
            for trial in self._trials("job"):
                if trial.user_attrs.get("key") in wanted:
                    by_key.setdefault(trial.user_attrs["key"], []).append(trial)
            for key, job in wanted.items():
                if key not in results:
                    self._settle(job, by_key.get(key, []), results, enqueued)
                    if key in results and done is not None:
                        done(key, results[key])
            if len(results) == len(wanted):
                self.pull()
                return results
            if not self.work(lambda attrs: attrs.get("key") in wanted and attrs.get("key") not in results, execute):
                time.sleep(self.poll_seconds)

    def _settle(self, job: Job, trials: list[optuna.trial.FrozenTrial], results: dict[str, dict[str, Any]],
                enqueued: set[int]) -> None:
        """The job's result when a trial of it is COMPLETE; else it is enqueued unless one is WAITING or RUNNING."""
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        if complete:
            results[job.key] = dict(complete[0].user_attrs.get("result") or {})
            return
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in trials):
            return
        cut = [t for t in trials if t.user_attrs.get("budget") and t._trial_id in enqueued]
        if cut:
            results[job.key] = {"budget": cut[0].user_attrs["budget"]}
            return
        raised = [t.user_attrs["error"] for t in trials if t.user_attrs.get("error")]
        if len(raised) >= ATTEMPTS:
            raise MemtraceError(f"job {job.key} failed {len(raised)} times; last: {raised[-1]}")
        if trials:
            log.info("job %s is run again (its worker %s stopped)", job.key, trials[-1].user_attrs.get("worker"))
        enqueued.add(self._create(TrialState.WAITING, {**job.attrs, "kind": "job", "key": job.key}))

    def work(self, accept: Callable[[Mapping[str, Any]], bool],
             execute: Callable[[Mapping[str, Any]], dict[str, Any]]) -> bool:
        """Claims the first WAITING job `accept` takes and runs it; False when there was none to claim."""
        for trial in sorted(self._trials("job", (TrialState.WAITING,)), key=lambda t: t.number):
            if not accept(trial.user_attrs) or not self._claim(trial._trial_id):
                continue
            self.pull()
            trial_id = int(trial._trial_id)
            before = self.spend() if self.spend is not None else 0
            try:
                result = execute(trial.user_attrs)
            except BudgetExhausted as spent:
                self._end(trial_id, TrialState.FAIL, budget=str(spent) or "budget spent")
                return True
            except Exception as error:  # noqa: BLE001 - recorded on the trial; the leader retries it or stops
                log.warning("job %s failed on %s: %s", trial.user_attrs.get("key"), self.worker, error, exc_info=True)
                self._end(trial_id, TrialState.FAIL, error=f"{type(error).__name__}: {error}")
                return True
            except BaseException:
                self._end(trial_id, TrialState.FAIL)
                raise
            self._merged.add(trial_id)
            calls = self.spend() - before if self.spend is not None else 0
            self._end(trial_id, TrialState.COMPLETE, float(result.get("score") or 0.0), result=result,
                      memo=self._memo_delta(), lm_calls=calls)
            if self.spend is not None:
                self.report_spend(self.spend())
            log.info("job %s done on %s (%d LM calls)", trial.user_attrs.get("key"), self.worker, calls)
            return True
        return False

    # the shared memo and spend ----------------------------------------------------------------------------
    def _memo_delta(self) -> dict[str, Any]:
        delta = self.memo.export(self._published)
        self._published = self.memo.mark()
        return delta

    def publish(self) -> None:
        """What this worker's memo learned since it last published, for the others (a finished `memo` trial)."""
        delta = self._memo_delta()
        if delta["ops"]:
            trial_id = self._create(TrialState.PRUNED, {"kind": "memo", "worker": self.worker, "memo": delta})
            self._merged.add(trial_id)

    def pull(self) -> int:
        """Merges the memo entries the other workers published since the last pull; returns how many were new."""
        finished = (TrialState.COMPLETE, TrialState.PRUNED)
        count = self.storage.get_n_trials(self.study_id, finished)
        if count == self._finished_seen:
            return 0
        added = 0
        for trial in self.storage.get_all_trials(self.study_id, deepcopy=False, states=finished):
            if trial._trial_id in self._merged:
                continue
            self._merged.add(trial._trial_id)
            if trial.user_attrs.get("worker") != self.worker and trial.user_attrs.get("memo"):
                added += self.memo.merge(trial.user_attrs["memo"])
        self._finished_seen = count
        return added

    def _spends(self) -> dict[str, int]:
        attrs = self.storage.get_study_user_attrs(self.study_id)
        return {name.removeprefix(keys.spend("")): int(value) for name, value in attrs.items()
                if name.startswith(keys.spend(""))}

    def report_spend(self, calls: int) -> None:
        """This worker's metered LM calls in this run, for the others' budgets."""
        self.storage.set_study_user_attr(self.study_id, keys.spend(self.worker), int(calls))

    def others_spent(self) -> int:
        """The metered LM calls the other workers made since this one joined (re-read every few seconds)."""
        read_at, total = self._others
        if time.monotonic() - read_at < SPEND_SECONDS:
            return total
        spends = self._spends()
        total = sum(max(0, calls - self._spend_start.get(worker, 0))
                    for worker, calls in spends.items() if worker != self.worker)
        self._others = (time.monotonic(), total)
        return total
