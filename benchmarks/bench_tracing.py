"""Tracing benchmarks: hook overhead, graph build throughput, replay reuse. Prints the figures.

    python benchmarks/bench_tracing.py [--repeats 5] [--sessions 24] [--events 100000] [--latency-ms 50]

1. Hook overhead: the same Mem0 run (fake LM, hash embedder, a synthetic conversation large enough that one
   run takes about a second) untraced, with a no-op DSPy callback (what DSPy's own callback dispatch costs),
   traced with the runner's background event writer, and traced writing each event synchronously from the
   program's thread; alternated in one process; best CPU time of each. Then the same with a simulated LM
   latency (wall time), which is what a real run looks like.
   Target: at most 5% overhead.
2. `build_graph` throughput (CPU) on a synthetic 100k-event log shaped like a real run (turns, LM ops with LM
   calls, store writes with updates and deletes, retrievals with reads, answers); also writing and reading
   the events file. Target: at least 100k events/s.
3. Replay reuse: the Mem0 run replayed with no change, and with a rewritten answer instruction.
4. Content lineage cost: `build_graph` on the largest LoCoMo conversation (most turn text; needs the LoCoMo
   file, skipped without it), from the events of a fake-LM run of each of `--content-systems`, with content
   lineage off (before) and on (after), best CPU time of `--repeats`; and the same Mem0 events with every
   turn and unit passed as a plain string (turns as "Speaker: text" transcripts, units as their text, store
   reads dropped), the worst case: every op's values searched for turn and unit texts.

A calibration line (a plain 10M-step Python loop) says how fast this machine is at the time of the run.
Exit status 0 when both targets are met (the overhead one with the simulated latency).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
from dspy.utils.callback import BaseCallback  # noqa: E402

from memtrace_opt.data import Conversation, Question, Session, Turn  # noqa: E402
from memtrace_opt.programs.mem0 import Mem0Config, Mem0Memory  # noqa: E402
from memtrace_opt.testing import FakeCall, Skill, fake_lm  # noqa: E402
from memtrace_opt.tracing import (  # noqa: E402
    AnswerEvent,
    EventWriter,
    LMCallEvent,
    OpEvent,
    QuestionEvent,
    RunEnd,
    RunStart,
    StoreRecord,
    TurnEvent,
    build_graph,
    read_events,
    replay,
    trace_conversation,
)

PEOPLE = ("Maya", "Theo")
TOPICS = ("running", "pottery", "chemistry", "Denver", "Boston", "Japan", "bouldering", "Biscuit", "nursing",
          "a wedding", "a half marathon", "the hospital")


# a synthetic conversation ----------------------------------------------------------------------------
def synthetic_conversation(sessions: int, turns_per_session: int = 12, questions: int = 20) -> Conversation:
    rng = random.Random(7)
    built = []
    for s in range(1, sessions + 1):
        date = f"10:00 am on {1 + s % 28} May, 2023"
        turns = tuple(
            Turn(f"D{s}:{t}", PEOPLE[t % 2], f"{PEOPLE[t % 2]} talks about {rng.choice(TOPICS)} (s{s} t{t}).", s, date)
            for t in range(1, turns_per_session + 1)
        )
        built.append(Session(s, date, turns))
    qs = tuple(
        Question(f"bench:q{i}", f"What did {PEOPLE[i % 2]} say about {TOPICS[i % len(TOPICS)]}?", "x", "single-hop", 4,
                 (f"D{1 + i % sessions}:1",))
        for i in range(questions)
    )
    return Conversation("bench", PEOPLE, tuple(built), qs, "synthetic")


def _facts(call: FakeCall) -> dict:
    lines = [ln for ln in call.inputs.get("new_messages", "").splitlines() if not ln.startswith("[")]
    return {"facts": [ln.split(": ", 1)[-1] for ln in lines[:3]]}


def _decide(call: FakeCall) -> dict:
    import json

    existing = json.loads(call.inputs["existing_memories"])
    facts = json.loads(call.inputs["new_facts"])
    actions = []
    for i, fact in enumerate(facts):
        if existing and i == 0:
            actions.append({"event": "UPDATE", "id": existing[0]["id"], "text": f"{fact} (was: {existing[0]['text'][:40]})"})
        elif existing and i == 1 and len(existing) > 2:
            actions.append({"event": "DELETE", "id": existing[-1]["id"], "text": ""})
        else:
            actions.append({"event": "ADD", "id": "", "text": fact})
    return {"memory_actions": actions}


SKILLS = [Skill(("facts",), _facts), Skill(("memory_actions",), _decide),
          Skill(("answer",), lambda call: {"answer": "something"})]


def _untraced(program: Mem0Memory, conversation: Conversation) -> dict[str, str]:
    state = program.new_state(conversation)
    program.memorize(conversation, state)
    return {q.question_id: program.respond(q, state).answer for q in conversation.questions}


class _NoopCallback(BaseCallback):
    """Registers a callback that does nothing: what DSPy's own callback dispatch costs."""


def _slow(skill: Skill, seconds: float) -> Skill:
    def fn(call: FakeCall) -> dict:
        time.sleep(seconds)
        return dict(skill.fn(call))

    return Skill(skill.outputs, fn)


def bench_overhead(repeats: int, sessions: int, latency_ms: float = 0.0) -> dict[str, Any]:
    """CPU and wall seconds of the same run untraced, with a no-op DSPy callback, and traced (events to a file),
    alternated `repeats` times; the best of each (the least disturbed by other load on the machine)."""
    conversation = synthetic_conversation(sessions)
    program = Mem0Memory(Mem0Config(embedder="hash"))
    skills = [_slow(s, latency_ms / 1000) for s in SKILLS] if latency_ms else SKILLS
    lm = fake_lm(skills)
    cpu: dict[str, list[float]] = {"plain": [], "noop": [], "traced": [], "sync": []}
    wall: dict[str, list[float]] = {"plain": [], "noop": [], "traced": [], "sync": []}
    events = 0

    def measure(kind: str, fn) -> Any:
        began_cpu, began = time.process_time(), time.perf_counter()
        out = fn()
        cpu[kind].append(time.process_time() - began_cpu)
        wall[kind].append(time.perf_counter() - began)
        return out

    with tempfile.TemporaryDirectory() as tmp, dspy.context(lm=lm):
        expected = _untraced(program, conversation)  # warm up imports and caches
        for i in range(repeats):
            measure("plain", lambda: _untraced(program, conversation))
            with dspy.context(callbacks=[_NoopCallback()]):
                measure("noop", lambda: _untraced(program, conversation))

            def traced(i: int = i, background: bool = True) -> Any:
                with EventWriter(Path(tmp) / f"run{i}-{background}.jsonl", background=background) as writer:
                    return trace_conversation(program, conversation, None, writer=writer)

            result = measure("traced", traced)
            assert result.answers == expected, "tracing changed the answers"
            measure("sync", lambda: traced(background=False))
            events = len(result.events)
    best_cpu = {k: min(v) for k, v in cpu.items()}
    best_wall = {k: min(v) for k, v in wall.items()}
    return {
        "events": events,
        "cpu": best_cpu,
        "wall": best_wall,
        "overhead_cpu_pct": 100 * (best_cpu["traced"] / best_cpu["plain"] - 1),
        "dispatch_cpu_pct": 100 * (best_cpu["noop"] / best_cpu["plain"] - 1),
        "overhead_wall_pct": 100 * (best_wall["traced"] / best_wall["plain"] - 1),
        "sync_cpu_pct": 100 * (best_cpu["sync"] / best_cpu["plain"] - 1),
        "sync_wall_pct": 100 * (best_wall["sync"] / best_wall["plain"] - 1),
    }


def calibrate() -> float:
    """CPU seconds of a plain 10M-step Python loop (about 0.4 s on an unloaded current desktop core)."""
    began, total = time.process_time(), 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - began


# a synthetic event log -------------------------------------------------------------------------------
def synthetic_events(target: int) -> list:
    """About `target` events shaped like a Mem0 run: per window 2 turns, extract (+LM call), search (+reads),
    decide (+LM call), apply (+writes); per question a retrieve (+reads) and an answer (+LM call)."""
    rng = random.Random(3)
    events: list = [RunStart(system="mem0", dataset="synthetic", sample_id="big", models={"task": "fake"},
                             instructions={"extract_facts.predict": "Extract.", "answer.predict": "Answer."})]
    seq = 0
    live: list[dict] = []
    counter = 0
    msgs = [{"role": "system", "content": "You extract facts."}, {"role": "user", "content": "..."}]
    window = 0
    qn = 0

    def op(name, inputs, outputs, parent=None):
        nonlocal seq
        event = OpEvent(call_id=f"c{seq}", seq=seq, op=name, parent_call_id=parent, inputs=inputs, outputs=outputs,
                        started_at=float(seq), ended_at=float(seq) + 0.5, content_key=f"k{seq}",
                        predictor=None, instructions=None)
        seq += 1
        return event

    while len(events) < target:
        window += 1
        turns = [{"$turn": f"turn:D{window}:{i}", "dia_id": f"D{window}:{i}", "speaker": "A", "text": f"t{window}.{i}",
                  "session_index": window, "timestamp": None} for i in (1, 2)]
        events += [TurnEvent(f"D{window}:{i}", "A", f"t{window}.{i}", window) for i in (1, 2)]
        facts = [f"fact {window}.{i} about things" for i in (1, 2)]
        e = op("mem0.extract_facts", {"messages": turns}, {"facts": facts, "error": None})
        events += [LMCallEvent(f"l{e.seq}", e.call_id, "fake", msgs, "[[ ## facts ## ]]", 50, 10, 0.01), e]
        similar = rng.sample(live, min(3, len(live)))
        refs = [{"$mem": f"mem:{u['unit_id']}@{u['version']}", **u} for u in similar]
        e = op("mem0.search_similar", {"facts": facts, "k": 5, "state": "state:big#0123456789ab"}, {"memories": refs})
        events += [StoreRecord(e.call_id, "read", u) for u in similar] + [e]
        actions = [{"event": "ADD", "unit_id": None, "text": f} for f in facts]
        e = op("mem0.update_decision", {"facts": facts, "memories": refs}, {"memory_actions": actions, "error": None})
        events += [LMCallEvent(f"l{e.seq}", e.call_id, "fake", msgs, "[[ ## memory_actions ## ]]", 80, 20, 0.01), e]
        e = op("mem0.apply", {"actions": actions, "turns": turns, "state": "state:big#0123456789ab"}, {"skipped": 0})
        for f in facts:
            counter += 1
            unit = {"unit_id": f"memory-{counter}", "version": 1, "text": f, "kind": "memory", "timestamp": None,
                    "source_turns": [t["dia_id"] for t in turns], "deleted": False, "metadata": {}}
            live.append(unit)
            events.append(StoreRecord(e.call_id, "add", unit))
        if similar and window % 3 == 0:
            old = similar[0]
            if old in live:
                new = {**old, "version": old["version"] + 1, "text": old["text"] + " (updated)"}
                live[live.index(old)] = new
                events.append(StoreRecord(e.call_id, "update", new, previous=old))
        if len(live) > 20 and window % 5 == 0:
            old = live.pop(0)
            events.append(StoreRecord(e.call_id, "delete", {**old, "version": old["version"] + 1, "deleted": True},
                                      previous=old))
        events.append(e)
        if window % 4 == 0:
            qn += 1
            question = {"question_id": f"q{qn}", "question": "What?", "answer": "x", "category": "single-hop",
                        "category_id": 4, "evidence": [f"D{window}:1"]}
            events.append(QuestionEvent(question))
            qref = {"$question": f"q:q{qn}", **question}
            hits = rng.sample(live, min(5, len(live)))
            refs = [{"$mem": f"mem:{u['unit_id']}@{u['version']}", **u} for u in hits]
            e = op("mem0.retrieve", {"question": qref, "k": 5, "state": "state:big#0123456789ab"}, {"units": refs})
            events += [StoreRecord(e.call_id, "read", u) for u in hits] + [e]
            e = op("mem0.answer", {"question": qref, "context": refs[::-1]}, {"answer": "x", "error": None})
            events += [LMCallEvent(f"l{e.seq}", e.call_id, "fake", msgs, "[[ ## answer ## ]]", 200, 5, 0.01), e,
                       AnswerEvent(f"q{qn}", "x", e.call_id)]
    events.append(RunEnd(ended_at=0.0, ops=seq))
    return events


def bench_build(target: int, repeats: int) -> dict[str, float]:
    events = synthetic_events(target)
    times = []
    for _ in range(repeats):
        began = time.process_time()
        G = build_graph(events)
        times.append(time.process_time() - began)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        began = time.perf_counter()
        with EventWriter(path) as writer:
            for event in events:
                writer.emit(event)
        write_s = time.perf_counter() - began
        began = time.perf_counter()
        back = read_events(path)
        read_s = time.perf_counter() - began
        assert len(back) == len(events)
    best = min(times)
    return {"events": len(events), "nodes": G.number_of_nodes(), "edges": G.number_of_edges(),
            "build_s": best, "events_per_s": len(events) / best,
            "write_events_per_s": len(events) / write_s, "read_events_per_s": len(events) / read_s}


def bench_replay(sessions: int) -> dict[str, Any]:
    conversation = synthetic_conversation(sessions)
    program = Mem0Memory(Mem0Config(embedder="hash"))
    lm = fake_lm(SKILLS)
    with dspy.context(lm=lm):
        recorded = trace_conversation(program, conversation, None)
        same = replay(program, conversation, None, recorded.events)
        changed = replay(program, conversation, None, recorded.events,
                         instructions={"answer.predict": "Answer in one short phrase."})
    assert same.answers == recorded.answers and same.lm_calls == 0
    return {"recorded_ops": sum(recorded.op_counts.values()), "recorded_lm_calls": recorded.lm_calls,
            "same_reused": same.reused_ops, "same_rerun": same.rerun_ops, "same_lm_calls": same.lm_calls,
            "changed_reused": changed.reused_ops, "changed_rerun": changed.rerun_ops,
            "changed_lm_calls": changed.lm_calls, "changed_rerun_by_op": changed.rerun_by_op}


# content lineage on the largest LoCoMo conversation ---------------------------------------------------
def largest_locomo(spec: str = "locomo") -> Conversation | None:
    """The LoCoMo conversation with the most turn text, or None when the dataset file is not found."""
    from memtrace_opt.data import load_data
    from memtrace_opt.errors import MemtraceError

    try:
        conversations = load_data(spec).conversations
    except (MemtraceError, OSError):
        return None
    return max(conversations, key=lambda c: sum(len(t.text) for t in c.turns()))


def _as_strings(value: Any) -> Any:
    """A JSON value with turns as "Speaker: text" lines (a list of turns as one transcript) and units as their
    text; questions stay typed (the protocol's answer op takes the Question)."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "$turn" in v for v in value):
            return "\n".join(f"{v.get('speaker')}: {v.get('text')}" for v in value)
        return [_as_strings(v) for v in value]
    if isinstance(value, dict):
        if "$turn" in value:
            return f"{value.get('speaker')}: {value.get('text')}"
        if "$mem" in value:
            return value.get("text")
        if "$question" in value:
            return value
        return {k: _as_strings(v) for k, v in value.items()}
    return value


def stringified(events: list) -> list:
    """The events of a run as if its ops passed plain strings (see `_as_strings`); store reads dropped."""
    from dataclasses import replace

    out = []
    for event in events:
        if isinstance(event, StoreRecord) and event.action == "read":
            continue
        if isinstance(event, OpEvent):
            event = replace(event, inputs=_as_strings(event.inputs), outputs=_as_strings(event.outputs))
        out.append(event)
    return out


def _content_edges(G: Any) -> int:
    return sum(1 for *_, data in G.edges(data=True) if data.get("via"))


def bench_content(systems: list[str], repeats: int, spec: str = "locomo") -> dict[str, Any] | None:
    """Graph-build CPU seconds with content lineage off and on, per system, on the largest LoCoMo conversation."""
    from memtrace_opt.programs import make_program
    from memtrace_opt.testing.skills import default_skills

    conversation = largest_locomo(spec)
    if conversation is None:
        return None
    logs: dict[str, list] = {}
    for system in systems:
        program = make_program(system, {"embedder": "hash"})
        with dspy.context(lm=fake_lm(default_skills())):
            logs[system] = trace_conversation(program, conversation).events
    if "mem0" in logs:
        logs["mem0, values as strings"] = stringified(logs["mem0"])
    rows = {}
    for name, events in logs.items():
        best = {}
        for content in (False, True):
            times = []
            for _ in range(repeats):
                began = time.process_time()
                G = build_graph(events, content_lineage=content)
                times.append(time.process_time() - began)
            best[content] = min(times)
        rows[name] = {"events": len(events), "before_s": best[False], "after_s": best[True],
                      "content_edges": _content_edges(G), "edges": G.number_of_edges()}
    turns = sum(len(s.turns) for s in conversation.sessions)
    return {"sample_id": conversation.sample_id, "turns": turns, "questions": len(conversation.questions),
            "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="simulated LM latency for the second run")
    parser.add_argument("--content-systems", default="rag,mem0,long_context,evermemos",
                        help="systems whose LoCoMo events measure content lineage (comma-separated)")
    parser.add_argument("--only-content", action="store_true", help="run the content lineage benchmark only")
    args = parser.parse_args(argv)

    print(f"machine         10M-step Python loop: {calibrate():.2f} s CPU (about 0.4 s on an unloaded desktop core)")
    c = bench_content([s for s in args.content_systems.split(",") if s], args.repeats)
    if c is None:
        print("content lineage skipped: the LoCoMo file was not found (memtrace data fetch locomo)")
    else:
        print(f"content lineage build_graph on LoCoMo {c['sample_id']} ({c['turns']} turns, {c['questions']} "
              f"questions), best of {args.repeats}, CPU, content lineage off -> on:")
        for name, row in c["rows"].items():
            print(f"  {name:<24} {row['events']:>6} events  {row['before_s']:.3f}s -> {row['after_s']:.3f}s "
                  f"({100 * (row['after_s'] / row['before_s'] - 1):+.0f}%)  {row['content_edges']} content edges "
                  f"of {row['edges']}")
    if args.only_content:
        return 0

    o = bench_overhead(args.repeats, args.sessions)
    print(f"hook overhead   zero-latency fake LM, best of {args.repeats}: untraced {o['cpu']['plain']:.3f}s CPU, "
          f"no-op DSPy callback {o['cpu']['noop']:.3f}s ({o['dispatch_cpu_pct']:+.1f}%), "
          f"traced {o['cpu']['traced']:.3f}s ({o['overhead_cpu_pct']:+.1f}%; synchronous writer "
          f"{o['sync_cpu_pct']:+.1f}%); wall {o['overhead_wall_pct']:+.1f}%; {o['events']} events/run")
    slow = bench_overhead(max(2, args.repeats // 2), max(4, args.sessions // 4), args.latency_ms)
    print(f"hook overhead   fake LM with {args.latency_ms:.0f} ms latency: untraced {slow['wall']['plain']:.2f}s, "
          f"no-op DSPy callback {slow['wall']['noop']:.2f}s, traced {slow['wall']['traced']:.2f}s wall "
          f"({slow['overhead_wall_pct']:+.1f}%; synchronous writer {slow['sync_wall_pct']:+.1f}%)  target <= 5%")
    b = bench_build(args.events, max(1, args.repeats // 2))
    print(f"build_graph     {b['events']} events -> {b['nodes']} nodes, {b['edges']} edges in {b['build_s']:.3f}s CPU "
          f"= {b['events_per_s']:,.0f} events/s  target >= 100,000")
    print(f"event log       write {b['write_events_per_s']:,.0f} events/s (flushed per event)  "
          f"read {b['read_events_per_s']:,.0f} events/s")
    r = bench_replay(max(4, args.sessions // 3))
    print(f"replay          recorded {r['recorded_ops']} ops / {r['recorded_lm_calls']} LM calls; "
          f"no change: {r['same_reused']} reused, {r['same_rerun']} re-run, {r['same_lm_calls']} LM calls; "
          f"new answer instruction: {r['changed_reused']} reused, {r['changed_rerun']} re-run "
          f"{r['changed_rerun_by_op']}, {r['changed_lm_calls']} LM calls")
    ok = slow["overhead_wall_pct"] <= 5 and b["events_per_s"] >= 100_000
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
