"""Every candidate instruction is an Optuna trial; the study is the optimization's durable record.

    ledger = StudyLedger.open(storage="sqlite:///run/optuna.db", study_name="memtrace-mem0-1a2b3c4d")
    done = ledger.finished("r2:answer.predict:9f..")     # a trial already evaluated: reuse, no LM call
    with ledger.trial(key, attrs) as trial:               # a RUNNING trial while the candidate is evaluated
        trial.minibatch(0.5); trial.validated(0.62)       # or trial.pruned()

Study-level user attributes hold what is not a candidate: the baseline, and per round its plan (`round:N`, a
`RoundPlan`: blame, chosen predictor, candidates) and its outcome (`round_done:N`, a `RoundRecord`). A killed run resumes from them without repeating a
finished trial or re-asking the reflection LM. Trials that did not reach the valset are PRUNED (their
minibatch score is the intermediate value); validated ones are COMPLETE with the valset score as value.

Any Optuna storage URL works (SQLite file by default; PostgreSQL/MySQL let several workers share one
optimization). With a database storage, RUNNING trials send heartbeats, so a worker meeting a candidate that
another live worker is evaluating waits for its result instead of repeating it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.trial import TrialState

__all__ = ["StudyLedger", "StudyReplyBook", "TrialHandle", "default_storage", "heartbeat_seconds"]

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 20
GRACE_SECONDS = 60


def heartbeat_seconds(storage: Any) -> int | None:
    """The seconds between an Optuna storage's heartbeats; None when it keeps none (journal, in memory)."""
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    return None if interval is None else int(interval)


def default_storage(run_dir: Any) -> str:
    """The SQLite URL of the study file inside a run directory."""
    from pathlib import Path

    return f"sqlite:///{Path(run_dir).resolve() / 'optuna.db'}"


@dataclass
class TrialHandle:
    """A RUNNING trial of one candidate; say how it ended with `validated` or `pruned`."""

    ledger: StudyLedger
    trial: optuna.trial.Trial
    attrs: dict[str, Any] = field(default_factory=dict)
    state: str = "running"

    def set(self, name: str, value: Any) -> None:
        self.trial.set_user_attr(name, value)
        self.attrs[name] = value

    def minibatch(self, score: float) -> None:
        self.trial.report(score, step=0)
        self.set("minibatch_score", score)

    def validated(self, val_score: float, **attrs: Any) -> None:
        for name, value in {"val_score": val_score, **attrs}.items():
            self.set(name, value)
        self.ledger.study.tell(self.trial, val_score)
        self.state = "complete"

    def pruned(self, **attrs: Any) -> None:
        for name, value in {"val_score": None, **attrs}.items():
            self.set(name, value)
        self.ledger.study.tell(self.trial, state=TrialState.PRUNED)
        self.state = "pruned"


class StudyLedger:
    """An Optuna study used as the record of an optimization (see the module docstring)."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    @classmethod
    def open(cls, *, storage: str | None, study_name: str, heartbeat: int | None = None) -> StudyLedger:
        """Create or load `study_name` in `storage` (an Optuna storage URL; None keeps it in memory). A database
        storage keeps heartbeats every `heartbeat` seconds (default 20); a trial silent for three of them is
        failed as its worker's death."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        backend: Any = storage
        interval = max(1, int(heartbeat or HEARTBEAT_SECONDS))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if isinstance(storage, str) and not storage.startswith(("journal", "memory")):
                backend = _database(storage, interval)
            study = optuna.create_study(study_name=study_name, storage=backend, direction="maximize",
                                        load_if_exists=True)
            if isinstance(backend, optuna.storages.RDBStorage):  # trials of killed workers stop being RUNNING
                optuna.storages.fail_stale_trials(study)
        return cls(study)

    # study-level records ------------------------------------------------------------------------------
    def get(self, name: str, default: Any = None) -> Any:
        return self.study.user_attrs.get(name, default)

    def put(self, name: str, value: Any) -> None:
        self.study.set_user_attr(name, value)

    # trials -------------------------------------------------------------------------------------------
    def _with_key(self, key: str) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get("key") == key]

    def finished(self, key: str, *, wait_seconds: float = 600.0) -> dict[str, Any] | None:
        """The user attributes of a finished (COMPLETE or PRUNED) trial for `key`, or None. A trial another
        live worker is running is waited for (up to `wait_seconds`)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            trials = self._with_key(key)
            done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
            if done:
                return dict(done[0].user_attrs)
            running = [t for t in trials if t.state == TrialState.RUNNING]
            if not running or not self._heartbeats() or time.monotonic() > deadline:
                return None
            optuna.storages.fail_stale_trials(self.study)
            if all(t.state != TrialState.RUNNING for t in self._with_key(key)):
                continue
            time.sleep(2.0)

    def record(self, key: str, attrs: dict[str, Any], value: float | None) -> None:
        """One candidate as a finished trial: COMPLETE with its valset score `value`, else PRUNED."""
        with warnings.catch_warnings():  # heartbeats are meant for study.optimize; this trial ends at once
            warnings.simplefilter("ignore", UserWarning)
            trial = self.study.ask()
        trial.set_user_attr("key", key)
        for name, item in attrs.items():
            trial.set_user_attr(name, item)
        if value is None:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, float(value))

    def trials_count(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for trial in self.study.get_trials(deepcopy=False):
            counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
        return counts

    def _heartbeats(self) -> bool:
        return heartbeat_seconds(self.study._storage) is not None

    @contextlib.contextmanager
    def trial(self, key: str, attrs: dict[str, Any]) -> Iterator[TrialHandle]:
        """A RUNNING trial for `key` for the duration of the block; it is marked FAIL if the block raises
        (or ends without `validated`/`pruned`)."""
        with warnings.catch_warnings():  # heartbeats are meant for study.optimize; we send them ourselves
            warnings.simplefilter("ignore", UserWarning)
            trial = self.study.ask()
        handle = TrialHandle(self, trial)
        handle.set("key", key)
        for name, value in attrs.items():
            handle.set(name, value)
        stop = threading.Event()
        beat = None
        if self._heartbeats():
            beat = threading.Thread(target=self._beat, args=(trial._trial_id, stop), daemon=True)
            beat.start()
        try:
            yield handle
        finally:
            stop.set()
            if beat is not None:
                beat.join(timeout=5)
            if handle.state == "running":
                with contextlib.suppress(Exception):
                    self.study.tell(trial, state=TrialState.FAIL)

    def _beat(self, trial_id: int, stop: threading.Event) -> None:
        storage: Any = self.study._storage
        while True:
            try:
                storage.record_heartbeat(trial_id)
            except Exception:  # noqa: BLE001 - a missed heartbeat only risks the trial being failed as stale
                log.debug("heartbeat for trial %s failed", trial_id, exc_info=True)
            if stop.wait(storage.get_heartbeat_interval() or HEARTBEAT_SECONDS):
                return


class StudyReplyBook:
    """A `ReplyBook` (`gates/local_objective.py`) kept in the study, one attribute per `name`: the local objective's
    replies of a round, so a resumed round (or another worker) re-runs no call twice. Written through after each
    reply; a reply another worker wrote meanwhile is read on a miss."""

    def __init__(self, ledger: StudyLedger, name: str) -> None:
        self.ledger, self.name = ledger, name
        self._lock = threading.Lock()
        self._replies: dict[str, str] = dict(ledger.get(name) or {})

    def get(self, key: str) -> str | None:
        with self._lock:
            if key not in self._replies:
                self._replies.update(self.ledger.get(self.name) or {})
            return self._replies.get(key)

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._replies = {**(self.ledger.get(self.name) or {}), **self._replies, key: reply}
            self.ledger.put(self.name, self._replies)


def _database(url: str, heartbeat: int) -> optuna.storages.RDBStorage:
    """The database storage at `url`, with heartbeats. Workers starting at once may race to create its tables:
    the loser of that race tries again."""
    # SQLite shared by several processes: wait for a writer's lock instead of failing at once
    options = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=options, heartbeat_interval=heartbeat,
                                              grace_period=heartbeat * GRACE_SECONDS // HEARTBEAT_SECONDS)
        except sqlalchemy.exc.SQLAlchemyError:
            if attempt == 4:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")
