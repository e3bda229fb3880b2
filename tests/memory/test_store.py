from __future__ import annotations

import threading

import pytest

from memtrace_opt.memory import MemoryStore, StoreEvent, UnknownUnit


class Recorder:
    def __init__(self) -> None:
        self.events: list[StoreEvent] = []

    def on_store_event(self, event: StoreEvent) -> None:
        self.events.append(event)


def test_add_update_delete_make_versions_and_report_each_write():
    store, seen = MemoryStore("s"), Recorder()
    store.subscribe(seen)
    first = store.add("Maya lives in Boston", kind="fact", timestamp="2023-03-01", source_turns=["D1:2"])
    second = store.update(first.unit_id, "Maya lives in Denver", source_turns=["D3:4"])
    third = store.delete(first.unit_id)

    assert (first.version, second.version, third.version) == (1, 2, 3)
    assert first.unit_id == second.unit_id == third.unit_id == "fact-1"
    assert second.source_turns == ("D1:2", "D3:4")  # sources accumulate across versions
    assert second.timestamp == "2023-03-01"  # kept when the update gives none
    assert third.deleted and third.text == "Maya lives in Denver"
    assert [e.action for e in seen.events] == ["add", "update", "delete"]
    assert seen.events[1].previous == first and seen.events[2].previous == second
    assert [u.ref for u in store.history(first.unit_id)] == ["mem:fact-1@1", "mem:fact-1@2", "mem:fact-1@3"]
    assert store.active() == [] and len(store) == 0


def test_writes_to_a_deleted_or_unknown_unit_are_refused():
    store = MemoryStore()
    unit = store.add("x")
    store.delete(unit.unit_id)
    with pytest.raises(UnknownUnit):
        store.update(unit.unit_id, "y")
    with pytest.raises(UnknownUnit):
        store.delete(unit.unit_id)
    with pytest.raises(UnknownUnit):
        store.get("nope")


def test_reads_are_reported_and_unsubscribe_stops_reports():
    store, seen = MemoryStore(), Recorder()
    store.subscribe(seen)
    unit = store.add("a")
    assert store.read([unit]) == [unit]
    store.unsubscribe(seen)
    store.add("b")
    assert [e.action for e in seen.events] == ["add", "read"]


def test_ids_are_unique_under_concurrent_adds():
    store = MemoryStore()

    def add_many() -> None:
        for i in range(200):
            store.add(f"t{i}")

    threads = [threading.Thread(target=add_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = [u.unit_id for u in store.active()]
    assert len(ids) == len(set(ids)) == 800


def test_unit_round_trips_through_dict():
    store = MemoryStore()
    unit = store.add("Biscuit is a beagle", kind="fact", source_turns=["D2:1"], metadata={"memcell": "m-1"})
    from memtrace_opt.memory import MemoryUnit

    assert MemoryUnit.from_dict(unit.to_dict()) == unit
    assert MemoryUnit.from_dict(unit.to_dict()).metadata == {"memcell": "m-1"}


def test_a_unit_can_take_the_id_another_library_gave_it():
    store = MemoryStore()
    mirrored = store.add("Odalys swims at dawn", unit_id="3f2a9c1e-0000-4000-8000-000000000001")
    counted = store.add("Odalys keeps bees")

    assert mirrored.ref == "mem:3f2a9c1e-0000-4000-8000-000000000001@1"
    assert counted.unit_id == "memory-1"  # a given id takes no number from the count
    assert store.update(mirrored.unit_id, "Odalys swims at dusk").version == 2
    with pytest.raises(ValueError, match="already in the store"):
        store.add("again", unit_id=mirrored.unit_id)
