"""The optimization's study: its durable record (the loop's state by `keys.py`, a finished trial per candidate).

    ledger = StudyLedger.open(storage="sqlite:///run/optuna.db", study_name="memtrace-mem0-1a2b3c4d")
    ledger.get(keys.done(2)); ledger.put(keys.plan(3), plan.to_dict())
    ledger.record(candidate.key(3, parent), attrs, val_score)    # one finished trial per candidate

Study-level user attributes hold the loop's state, by the keys of `keys.py`: the baseline, per round its plan and
its record. Each candidate a round tried is recorded as a finished trial (COMPLETE with its valset score, else
PRUNED): the study is the optimization's durable record of what it tried. A killed run resumes from the recorded
rounds; what a round cut short had paid for comes back from the reply cache.

Any Optuna storage URL works (SQLite file by default; PostgreSQL/MySQL let several workers share one
optimization, `crew.py`); a database storage keeps heartbeats, by which a killed worker's jobs are run again.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.trial import TrialState

__all__ = ["StudyLedger", "StudyReplyBook", "default_storage", "heartbeat_seconds"]

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
