"""The explicit, per-conversation memory store.

A store is plain state passed through a program, never an attribute of a module: DSPy runs one program
object in every thread. Every write (add, update, delete) and every read is reported to the store's
observers, tagged with nothing but the unit; the trace hook ties each report to the operation call that is
active when it happens.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

__all__ = ["MemoryUnit", "StoreEvent", "StoreObserver", "MemoryStore", "UnknownUnit"]

StoreAction = Literal["add", "update", "delete", "read"]


class UnknownUnit(KeyError):
    """An update or delete named a unit the store does not hold (or holds only as deleted)."""


@dataclass(frozen=True)
class MemoryUnit:
    """One version of a memory unit. `unit_id` is stable across versions; `version` starts at 1."""

    unit_id: str
    version: int
    text: str
    kind: str = "memory"
    timestamp: str | None = None
    source_turns: tuple[str, ...] = ()
    deleted: bool = False
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def ref(self) -> str:
        """The graph node id of this version."""
        return f"mem:{self.unit_id}@{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit_id": self.unit_id,
            "version": self.version,
            "text": self.text,
            "kind": self.kind,
            "timestamp": self.timestamp,
            "source_turns": list(self.source_turns),
            "deleted": self.deleted,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryUnit:
        return cls(
            unit_id=data["unit_id"],
            version=int(data["version"]),
            text=data["text"],
            kind=data.get("kind", "memory"),
            timestamp=data.get("timestamp"),
            source_turns=tuple(data.get("source_turns", ())),
            deleted=bool(data.get("deleted", False)),
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class StoreEvent:
    """A write or read of one unit. `unit` is the version written or read; `previous` the version an update
    or delete replaced."""

    action: StoreAction
    store_id: str
    unit: MemoryUnit
    previous: MemoryUnit | None = None


class StoreObserver(Protocol):
    """Receives every store event synchronously, in the thread that caused it. Must not raise."""

    def on_store_event(self, event: StoreEvent) -> None: ...


class MemoryStore:
    """Versioned units with observers. Thread-safe; unit ids are deterministic (`{kind}-{n}`) unless `add` is given one."""

    def __init__(self, store_id: str = "store") -> None:
        self.store_id = store_id
        self._versions: dict[str, list[MemoryUnit]] = {}
        self._observers: list[StoreObserver] = []
        self._counter = 0
        self._lock = threading.RLock()

    # observers -------------------------------------------------------------------------------------
    def subscribe(self, observer: StoreObserver) -> None:
        with self._lock:
            if observer not in self._observers:
                self._observers.append(observer)

    def unsubscribe(self, observer: StoreObserver) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

    def _emit(self, event: StoreEvent) -> None:
        for observer in list(self._observers):
            observer.on_store_event(event)

    # writes ----------------------------------------------------------------------------------------
    def add(
        self,
        text: str,
        *,
        kind: str = "memory",
        timestamp: str | None = None,
        source_turns: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
        unit_id: str | None = None,
    ) -> MemoryUnit:
        """A new unit (version 1). Its id is `{kind}-{n}` unless `unit_id` gives one: the id another library
        assigned, for a store that mirrors it. Raises ValueError for a `unit_id` the store already holds."""
        with self._lock:
            if unit_id is None:
                self._counter += 1
                unit_id = f"{kind}-{self._counter}"
            elif unit_id in self._versions:
                raise ValueError(f"unit {unit_id!r} is already in the store")
            unit = MemoryUnit(
                unit_id=unit_id,
                version=1,
                text=text,
                kind=kind,
                timestamp=timestamp,
                source_turns=tuple(source_turns),
                metadata=dict(metadata or {}),
            )
            self._versions[unit.unit_id] = [unit]
        self._emit(StoreEvent("add", self.store_id, unit))
        return unit

    def update(
        self,
        unit_id: str,
        text: str,
        *,
        timestamp: str | None = None,
        source_turns: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> MemoryUnit:
        """A new version of a live unit; source turns accumulate, metadata merges."""
        with self._lock:
            previous = self._live(unit_id)
            merged_sources = tuple(dict.fromkeys((*previous.source_turns, *source_turns)))
            unit = replace(
                previous,
                version=previous.version + 1,
                text=text,
                timestamp=timestamp or previous.timestamp,
                source_turns=merged_sources,
                metadata={**previous.metadata, **(metadata or {})},
            )
            self._versions[unit_id].append(unit)
        self._emit(StoreEvent("update", self.store_id, unit, previous))
        return unit

    def delete(self, unit_id: str) -> MemoryUnit:
        """Marks a live unit deleted: a new version with `deleted=True` and the same text."""
        with self._lock:
            previous = self._live(unit_id)
            unit = replace(previous, version=previous.version + 1, deleted=True)
            self._versions[unit_id].append(unit)
        self._emit(StoreEvent("delete", self.store_id, unit, previous))
        return unit

    # reads -----------------------------------------------------------------------------------------
    def read(self, units: Iterable[MemoryUnit]) -> list[MemoryUnit]:
        """Reports that an operation read these units (retrieval, context assembly). Returns them as a list."""
        units = list(units)
        for unit in units:
            self._emit(StoreEvent("read", self.store_id, unit))
        return units

    def get(self, unit_id: str) -> MemoryUnit:
        """The latest version (deleted or not). Raises UnknownUnit."""
        with self._lock:
            if unit_id not in self._versions:
                raise UnknownUnit(unit_id)
            return self._versions[unit_id][-1]

    def history(self, unit_id: str) -> list[MemoryUnit]:
        with self._lock:
            if unit_id not in self._versions:
                raise UnknownUnit(unit_id)
            return list(self._versions[unit_id])

    def active(self) -> list[MemoryUnit]:
        """Latest versions that are not deleted, in creation order."""
        with self._lock:
            return [v[-1] for v in self._versions.values() if not v[-1].deleted]

    def all_versions(self) -> list[MemoryUnit]:
        with self._lock:
            return [unit for versions in self._versions.values() for unit in versions]

    def __len__(self) -> int:
        return len(self.active())

    def _live(self, unit_id: str) -> MemoryUnit:
        versions = self._versions.get(unit_id)
        if not versions or versions[-1].deleted:
            raise UnknownUnit(unit_id)
        return versions[-1]
