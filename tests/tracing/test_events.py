from __future__ import annotations

import json
import logging

import pytest

from memtrace_opt.errors import MemtraceError
from memtrace_opt.tracing.events import (
    SCHEMA_VERSION,
    AnswerEvent,
    EventWriter,
    LMCallEvent,
    OpEvent,
    QuestionEvent,
    RunEnd,
    RunStart,
    StoreRecord,
    TurnEvent,
    event_from_dict,
    read_events,
)

SAMPLES = [
    RunStart(system="toy", dataset="toy", sample_id="s1", models={"task": "fake/test"},
             instructions={"answer.predict": "Answer."}, config={"top_k": 3}, meta={"run_id": "r"}, started_at=1.5),
    TurnEvent(dia_id="D1:1", speaker="Alice", text="hi", session_index=1, timestamp="8 May 2023"),
    OpEvent(call_id="c1", seq=0, op="toy.extract", parent_call_id=None, predictor="extract.predict",
            instructions="Extract.", inputs={"turns": [{"$turn": "turn:D1:1"}]}, outputs={"facts": ["a fact"]},
            started_at=1.0, ended_at=2.0, replayed="memo", content_key="ab" * 32),
    LMCallEvent(call_id="l1", op_call_id="c1", model="fake/test", messages=[{"role": "user", "content": "x"}],
                response="[[ ## facts ## ]]", prompt_tokens=3, completion_tokens=2, seconds=0.01, cached=False),
    StoreRecord(op_call_id="c2", action="update", unit={"unit_id": "memory-1", "version": 2, "text": "b"},
                previous={"unit_id": "memory-1", "version": 1, "text": "a"}, store_id="toy:s1"),
    QuestionEvent(question={"question_id": "q1", "question": "Where?"}),
    AnswerEvent(question_id="q1", answer="Paris", op_call_id="c9", error=None),
    RunEnd(ended_at=9.0, ops=3, lm_calls=2, failures=0),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_every_event_round_trips_through_json(event):
    data = json.loads(json.dumps(event.to_dict()))
    assert data["type"] == event.type
    assert event_from_dict(data) == event


def test_run_start_carries_the_schema_version():
    assert SAMPLES[0].to_dict()["schema_version"] == SCHEMA_VERSION == 1


def test_unknown_type_and_newer_schema_are_refused():
    with pytest.raises(MemtraceError, match="unknown trace event type"):
        event_from_dict({"type": "mystery"})
    newer = {**SAMPLES[0].to_dict(), "schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(MemtraceError, match="newer"):
        event_from_dict(newer)


def test_unknown_keys_from_a_newer_writer_are_ignored():
    data = {**SAMPLES[6].to_dict(), "added_later": True}
    assert event_from_dict(data) == SAMPLES[6]


def test_writer_flushes_every_event_before_close(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path, keep=True)
    for count, event in enumerate(SAMPLES, start=1):
        writer.emit(event)
        # read through a separate handle while the writer is still open: every line is on disk
        assert len(path.read_text(encoding="utf-8").splitlines()) == count
    writer.close()
    assert read_events(path) == SAMPLES
    assert writer.events == SAMPLES


def test_a_truncated_last_line_is_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        for event in SAMPLES[:4]:
            writer.emit(event)
    text = path.read_text(encoding="utf-8")
    last = json.dumps(SAMPLES[4].to_dict())
    path.write_text(text + last[: len(last) // 2], encoding="utf-8")  # a crash mid-write
    with caplog.at_level(logging.WARNING):
        events = read_events(path)
    assert events == SAMPLES[:4]
    assert "truncated" in caplog.text


def test_a_bad_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [json.dumps(SAMPLES[0].to_dict()), "{not json", json.dumps(SAMPLES[1].to_dict())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(MemtraceError, match="line 2"):
        read_events(path)


def test_events_are_frozen():
    with pytest.raises(AttributeError):
        SAMPLES[1].text = "changed"  # type: ignore[misc]


def test_background_writer_keeps_order_and_drains_on_close(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path, keep=True, background=True)
    for event in SAMPLES:
        writer.emit(event)
    writer.flush()  # everything emitted so far is on disk, the writer still open
    assert read_events(path) == SAMPLES
    for event in SAMPLES:
        writer.emit(event)
    writer.close()
    assert read_events(path) == SAMPLES + SAMPLES
    assert writer.events == SAMPLES + SAMPLES
    writer.emit(SAMPLES[0])  # after close: dropped, not queued forever
    assert read_events(path) == SAMPLES + SAMPLES


def test_background_writer_loses_nothing_when_the_program_raises(tmp_path):
    path = tmp_path / "events.jsonl"
    with pytest.raises(RuntimeError), EventWriter(path, background=True) as writer:
        for event in SAMPLES:
            writer.emit(event)
        raise RuntimeError("the program crashed")
    assert read_events(path) == SAMPLES


def test_background_writer_from_many_threads(tmp_path):
    import threading

    path = tmp_path / "events.jsonl"
    with EventWriter(path, background=True) as writer:
        threads = [threading.Thread(target=lambda: [writer.emit(e) for e in SAMPLES]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    back = read_events(path)
    assert len(back) == 4 * len(SAMPLES) and sorted(map(repr, back)) == sorted(map(repr, SAMPLES * 4))
