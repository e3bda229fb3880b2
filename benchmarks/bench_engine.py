"""The embedded engine's levers, measured: per op kind, then Mem0 and EverMemOS end to end, before and after.

    python benchmarks/bench_engine.py                       # LoCoMo conv-26 sessions 1-3, every part
    python benchmarks/bench_engine.py --parts ops --calls 1 # only the per-op lever table
    python benchmarks/bench_engine.py --evermemos-questions 10
    python benchmarks/bench_engine.py --systems evermemos --evermemos-questions 10 --parts before,after

Parts (each saved to OUT/results.json as it finishes; a rerun with the same OUT skips finished parts):
1. `before`: Mem0 and EverMemOS memorize the slice and answer its questions with every lever off (the engine as
   it ran before them: only the previous call's prompt prefix reused, no grammar). DSPy's cache is off.
2. `ops`: LM calls recorded in part 1 (mem0 extract_facts and update_decision, evermemos extract_episode) and
   long_context answer prompts over the slice (built with the fake LM: that prompt holds no model output) are
   replayed, interleaved as a real run interleaves them, under each lever configuration: prompt tokens, cached
   prefix tokens, prefill and decode tokens/s, seconds per call, replies that do not parse or were cut at the
   token limit, and how many replies differ from the levers-off reply.
3. `after`: part 1 again with the default levers.
`--systems` limits parts 1 and 3 to the named systems (part 2 replays recorded calls of both).
Then the tables: seconds per session of each write path, read-path seconds, accuracy before/after paired
(fixed/broken), unparseable replies and replies cut at the token limit per op.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memtrace_opt.data import DataSlice, parse_sessions  # noqa: E402
from memtrace_opt.lm.chat_prompt import system_and_last_user  # noqa: E402
from memtrace_opt.lm.embedded import EmbeddedEngine, EngineLevers  # noqa: E402
from memtrace_opt.lm.grammar import reply_format  # noqa: E402
from memtrace_opt.lm.models import Models  # noqa: E402
from memtrace_opt.lm.roles import ModelRoles, ModelSpec  # noqa: E402
from memtrace_opt.runner import RunRequest, run_system  # noqa: E402
from memtrace_opt.tracing import load_graph  # noqa: E402

SYSTEMS = ("mem0", "evermemos")
OP_KINDS = ("mem0.extract_facts", "mem0.update_decision", "evermemos.extract_episode", "long_context.answer")
COMPLETED = "[[ ## completed ## ]]"

CONFIGS: dict[str, EngineLevers] = {
    "off": EngineLevers.off(),
    "prefix_cache": dataclasses.replace(EngineLevers.off(), prefix_cache_mb=1024),
    "grammar": dataclasses.replace(EngineLevers.off(), grammar=True),
    "default": EngineLevers(),
    "default+flash_attn": dataclasses.replace(EngineLevers(), flash_attn=True),
    "default+n_batch_64": dataclasses.replace(EngineLevers(), n_batch=64),
    "default+n_batch_512": dataclasses.replace(EngineLevers(), n_batch=512),
    "default-aligned_reuse": dataclasses.replace(EngineLevers(), aligned_reuse=False),
    "default+1_decode_thread": dataclasses.replace(EngineLevers(), n_threads=1),
}


# ---------------------------------------------------------------------------------------------------- replies
def reply_problems(messages: list[dict[str, str]], reply: str) -> tuple[bool, bool]:
    """(parses, cut): whether the ChatAdapter reply holds every field in a readable form, and whether it stops
    before the completed marker (a reply cut at the token limit)."""
    found = reply_format(*system_and_last_user(messages))
    cut = COMPLETED not in reply
    if found is None:
        return True, cut
    for index, (name, kind) in enumerate(zip(found.fields, found.kinds, strict=True)):
        marker = f"[[ ## {name} ## ]]"
        if marker not in reply:
            return False, cut
        value = reply.split(marker, 1)[1]
        following = [f"[[ ## {n} ## ]]" for n in found.fields[index + 1 :]] + [COMPLETED]
        for mark in following:
            value = value.split(mark, 1)[0]
        value = value.strip()
        if kind == "text":
            continue
        if isinstance(kind, tuple):
            if value not in kind[1]:
                return False, cut
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return False, cut
    return True, cut


# ---------------------------------------------------------------------------------------------------- systems
def run_one(system: str, data: str, data_slice: DataSlice, out: Path, levers: EngineLevers, limit: int | None) -> dict:
    extra: dict[str, Any] = {"cache": False, **dataclasses.asdict(levers)}
    roles = ModelRoles(task=ModelSpec(model="embedded", extra=extra))
    sliced = dataclasses.replace(data_slice, limit=limit) if limit else data_slice
    started = time.perf_counter()
    summary = run_system(RunRequest(system=system, data=data, out=out, roles=roles, data_slice=sliced, judge=False),
                         progress=True, models=Models.from_roles(roles))
    seconds = time.perf_counter() - started
    cases = [json.loads(line) for line in (out / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line]
    graphs = sorted((out / "graphs").glob("*.json"))
    return {"seconds": seconds, "questions": summary.questions, "correct": summary.correct,
            "cases": {c["question_id"]: bool(c["correct"]) for c in cases},
            "paths": graph_figures([load_graph(p) for p in graphs])}


def _session_of(dia_id: str) -> int | None:
    head = dia_id.split(":", 1)[0].lstrip("D")
    return int(head) if head.isdigit() else None


def reply_limits() -> dict[str, int]:
    """op name -> the reply token cap of every built-in system's bounded LM op (a reply that used it was cut)."""
    import importlib

    from memtrace_opt.programs.common import BoundedLMOperation

    for name in ("long_context", "rag", "mem0", "evermemos"):
        importlib.import_module(f"memtrace_opt.programs.{name}")
    limits: dict[str, int] = {}
    todo = list(BoundedLMOperation.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        op_name, cap = getattr(cls, "op_name", None), getattr(cls, "reply_tokens", None)
        if isinstance(op_name, str) and isinstance(cap, int):
            limits[op_name] = cap
    return limits


def graph_figures(graphs: list[Any]) -> dict:
    """Write-path seconds per session, read-path seconds, and per op: calls, unparseable replies and replies cut
    at the op's token cap."""
    limits = reply_limits()
    per_session: dict[int, float] = defaultdict(float)
    read_s = 0.0
    per_op: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for G in graphs:
        ops = sorted((n for n, a in G.nodes(data=True) if a.get("kind") == "op"), key=lambda n: G.nodes[n]["seq"])
        asks = [n for n in ops if any(str(p).startswith("q:") for p in G.predecessors(n))]
        first_read = min((G.nodes[n]["seq"] for n in asks), default=None)
        session = None
        for node in ops:
            attrs = G.nodes[node]
            found = (_session_of(str(p)[5:]) for p in G.predecessors(node) if str(p).startswith("turn:"))
            turns = [t for t in found if t is not None]
            if turns:
                session = max(turns)
            spent = float(attrs.get("ended_at") or 0) - float(attrs.get("started_at") or 0)
            if attrs.get("parent") is None:
                if first_read is not None and attrs["seq"] >= first_read:
                    read_s += spent
                elif session is not None:
                    per_session[session] += spent
            for call in attrs.get("lm_calls") or []:
                messages = call.get("messages") or []
                if isinstance(messages, str):
                    messages = json.loads(messages)
                parses, unfinished = reply_problems(messages, str(call.get("response") or ""))
                cap = limits.get(attrs["op"])
                cut = unfinished and cap is not None and int(call.get("completion_tokens") or 0) >= cap
                count = per_op[attrs["op"]]
                count["calls"] += 1
                count["unparseable"] += 0 if parses else 1
                count["cut"] += 1 if cut else 0
                count["seconds"] += float(call.get("seconds") or 0)
    return {"session_s": {str(k): round(v, 1) for k, v in sorted(per_session.items())}, "read_s": round(read_s, 1),
            "ops": {op: dict(c) for op, c in sorted(per_op.items())}}


# ---------------------------------------------------------------------------------------------------- ops
def recorded_calls(run_dir: Path, op: str, n: int) -> list[list[dict[str, str]]]:
    found: list[list[dict[str, str]]] = []
    for path in sorted((run_dir / "graphs").glob("*.json")):
        G = load_graph(path)
        for node in sorted((n for n, a in G.nodes(data=True) if a.get("op") == op), key=lambda n: G.nodes[n]["seq"]):
            for call in G.nodes[node].get("lm_calls") or []:
                messages = call["messages"]
                found.append(json.loads(messages) if isinstance(messages, str) else messages)
    return found[:n]


def long_context_prompts(data: str, data_slice: DataSlice, n: int, out: Path) -> list[list[dict[str, str]]]:
    """The long_context answer prompts of the slice, built by a run with the fake LM (they hold no model output)."""
    roles = ModelRoles(task=ModelSpec(model="fake"))
    sliced = dataclasses.replace(data_slice, limit=n)
    run_system(RunRequest(system="long_context", data=data, out=out, roles=roles, data_slice=sliced, judge=False),
               progress=False, models=Models.from_roles(roles))
    return recorded_calls(out, "long_context.answer", n)


def _request(messages: list[dict[str, str]], max_tokens: int) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(system=None, messages=[SimpleNamespace(role=m["role"], text=m["content"]) for m in messages],
                           config=SimpleNamespace(temperature=0.0, max_tokens=max_tokens, seed=None, top_p=None, stop=()))


def measure_ops(sequence: list[tuple[str, list[dict[str, str]], int]], configs: list[str], results: dict[str, Any],
                save: Any) -> dict:
    """Each configuration's figures go into `results` (and `save()`) as it finishes; one that fails is recorded
    with its error and the others still run."""
    from memtrace_opt.lm import embedded

    baseline: list[str] = results.get("off", {}).get("_replies", [])
    for name in configs:
        if name in results:
            continue
        engine = EmbeddedEngine(levers=CONFIGS[name], record_stats=True)
        replies = []
        try:
            for _op, messages, max_tokens in sequence:
                replies.append(engine.complete(_request(messages, max_tokens)).message.text or "")
        except Exception as error:  # noqa: BLE001 - a lever that breaks is a figure too
            results[name] = {"error": f"{type(error).__name__}: {error}"[:300]}
            print(f"  {name}: failed: {results[name]['error']}", file=sys.stderr, flush=True)
            save()
            embedded._LOADED.clear()
            continue
        if name == "off":
            baseline = replies
        rows: dict[str, Counter[str]] = defaultdict(Counter)
        for (op, messages, _), stats, reply, index in zip(sequence, engine.stats or [], replies, range(len(replies)),
                                                         strict=True):
            row = rows[op]
            parses, _ = reply_problems(messages, reply)
            row["calls"] += 1
            row["prompt_tokens"] += stats.prompt_tokens
            row["cached_tokens"] += stats.cached_tokens
            row["prefill_tokens"] += stats.prefill_tokens
            row["completion_tokens"] += stats.completion_tokens
            row["prefill_ms"] += int(stats.prefill_s * 1000)
            row["decode_ms"] += int(stats.decode_s * 1000)
            row["ms"] += int(stats.seconds * 1000)
            row["unparseable"] += 0 if parses else 1
            row["cut"] += 1 if stats.finish_reason == "length" else 0
            if baseline:
                row["differs_from_off"] += int(reply.strip() != baseline[index].strip())
        results[name] = {op: dict(c) for op, c in rows.items()}
        if name == "off":
            results[name]["_replies"] = replies
        print(f"  {name}: {sum(c['ms'] for c in rows.values()) / 1000:.1f}s", file=sys.stderr, flush=True)
        save()
        del engine
        embedded._LOADED.clear()  # one model in memory at a time
    return results


# ---------------------------------------------------------------------------------------------------- tables
def ops_table(ops: dict) -> list[str]:
    lines = ["| config | op | calls | prompt tok | cached tok | prefill tok/s | decode tok/s | s/call | unparseable | cut | differs from off |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in ops.items():
        if "error" in rows:
            lines.append(f"| {name} | (failed: {rows['error'][:120]}) | | | | | | | | | |")
            continue
        for op in OP_KINDS:
            c = rows.get(op)
            if not c:
                continue
            n = c["calls"]
            prefill = c["prefill_tokens"] / (c["prefill_ms"] / 1000) if c["prefill_ms"] else 0.0
            decode = c["completion_tokens"] / (c["decode_ms"] / 1000) if c["decode_ms"] else 0.0
            lines.append(f"| {name} | {op} | {n} | {c['prompt_tokens'] / n:.0f} | {c['cached_tokens'] / n:.0f} | "
                         f"{prefill:.0f} | {decode:.1f} | {c['ms'] / 1000 / n:.1f} | {c['unparseable']} | {c['cut']} | "
                         f"{c.get('differs_from_off', 0)} |")
    return lines


def systems_table(results: dict) -> list[str]:
    lines = ["| system | sessions | write s/session before | after | speed-up | read s before | after | "
             "accuracy before | after | fixed / broken | unparseable before / after | cut before / after |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for system in SYSTEMS:
        before, after = results.get(f"before/{system}"), results.get(f"after/{system}")
        if not before or not after:
            continue
        sb, sa = before["paths"]["session_s"], after["paths"]["session_s"]
        wb, wa = sum(sb.values()) / max(len(sb), 1), sum(sa.values()) / max(len(sa), 1)
        common = sorted(set(before["cases"]) & set(after["cases"]))
        fixed = sum(1 for q in common if after["cases"][q] and not before["cases"][q])
        broken = sum(1 for q in common if before["cases"][q] and not after["cases"][q])
        acc_b = sum(before["cases"][q] for q in common) / max(len(common), 1)
        acc_a = sum(after["cases"][q] for q in common) / max(len(common), 1)
        bad_b = sum(c.get("unparseable", 0) for c in before["paths"]["ops"].values())
        bad_a = sum(c.get("unparseable", 0) for c in after["paths"]["ops"].values())
        cut_b = sum(c.get("cut", 0) for c in before["paths"]["ops"].values())
        cut_a = sum(c.get("cut", 0) for c in after["paths"]["ops"].values())
        lines.append(f"| {system} | {len(sb)} | {wb:.0f} | {wa:.0f} | {wb / wa if wa else 0:.2f}x | "
                     f"{before['paths']['read_s']:.0f} | {after['paths']['read_s']:.0f} | {acc_b:.3f} | {acc_a:.3f} "
                     f"({len(common)} q) | {fixed} / {broken} | {bad_b} / {bad_a} | {cut_b} / {cut_a} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"
                                              / "locomo10.json"))
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--sessions", default="1-3")
    parser.add_argument("--evermemos-questions", type=int, default=None, help="answer only the first N (the read path is slow)")
    parser.add_argument("--mem0-questions", type=int, default=None)
    parser.add_argument("--calls", type=int, default=2, help="recorded calls replayed per op kind")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--parts", default="before,ops,after")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="run the end-to-end parts (before, after) for these systems only (comma list)")
    parser.add_argument("--out", type=Path, default=Path("runs") / "bench-engine")
    parser.add_argument("--refigure", action="store_true", help="recompute the graph figures of finished runs")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}

    def save() -> None:
        results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")

    if args.refigure:
        for key, value in results.items():
            if key.startswith(("before/", "after/")):
                graphs = sorted((args.out / key / "graphs").glob("*.json"))
                value["paths"] = graph_figures([load_graph(p) for p in graphs])
        save()
    data_slice = DataSlice(sample_ids=(args.sample,), sessions=parse_sessions(args.sessions))
    limits = {"mem0": args.mem0_questions, "evermemos": args.evermemos_questions}
    parts = args.parts.split(",")
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)} (choose from {', '.join(SYSTEMS)})")
    for part, levers in (("before", EngineLevers.off()), ("after", EngineLevers())):
        if part not in parts:
            continue
        for system in systems:
            key = f"{part}/{system}"
            if key in results:
                continue
            print(f"{key} ...", file=sys.stderr, flush=True)
            results[key] = run_one(system, args.data, data_slice, args.out / part / system, levers, limits[system])
            save()
        if part == "before" and "ops" in parts:
            ops_sequence = _op_sequence(args, data_slice)
            print(f"ops: {len(ops_sequence)} calls x {len(args.configs.split(','))} configs ...", file=sys.stderr)
            measure_ops(ops_sequence, args.configs.split(","), results.setdefault("ops", {}), save)
    lines = [f"bench_engine: {args.sample} sessions {args.sessions}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}", ""]
    if "ops" in results:
        lines += ops_table(results["ops"]) + [""]
    lines += systems_table(results)
    text = "\n".join(lines)
    (args.out / "results.md").write_text(text + "\n")
    print(text)
    return 0


def _op_sequence(args: argparse.Namespace, data_slice: DataSlice) -> list[tuple[str, list[dict[str, str]], int]]:
    """Recorded calls of each op kind, interleaved (extract, decide, episode, answer, extract, ...)."""
    from memtrace_opt.programs.common import AnswerOp
    from memtrace_opt.programs.evermemos import ExtractEpisode
    from memtrace_opt.programs.mem0 import ExtractFacts, UpdateDecision

    limits = {"mem0.extract_facts": ExtractFacts.reply_tokens, "mem0.update_decision": UpdateDecision.reply_tokens,
              "evermemos.extract_episode": ExtractEpisode.reply_tokens, "long_context.answer": AnswerOp.reply_tokens}
    found = {
        "mem0.extract_facts": recorded_calls(args.out / "before" / "mem0", "mem0.extract_facts", args.calls),
        "mem0.update_decision": recorded_calls(args.out / "before" / "mem0", "mem0.update_decision", args.calls),
        "evermemos.extract_episode": recorded_calls(args.out / "before" / "evermemos", "evermemos.extract_episode",
                                                    args.calls),
        "long_context.answer": long_context_prompts(args.data, data_slice, args.calls, args.out / "long_context-fake"),
    }
    sequence = []
    for index in range(args.calls):
        for op in OP_KINDS:
            if index < len(found[op]):
                sequence.append((op, found[op][index], limits[op]))
    return sequence


if __name__ == "__main__":
    sys.exit(main())
