"""A small, realistic run directory of a failing Mem0-style system, for tests, docs and trying the report.
Its conversation, questions and answers are made up (no benchmark's text).

`write_demo_run(path)` writes config.yaml, manifest.json (with two optimization rounds), cases.jsonl,
graphs/<sample>.json and verdicts.jsonl in the formats of docs/design.md. Seven questions about one conversation:
one answered right, and one failure of each kind the attribution names (extraction, update, deletion,
retrieval, response) plus one the attributor could not explain. `filler_sessions=N` adds N unrelated
sessions between the real ones (each reads the memories written so far), so the graph grows to thousands
of nodes while each question's story stays the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from memtrace_opt.data import ABSTAIN_ANSWER

__all__ = ["write_demo_run", "DEMO_SAMPLE_ID"]

DEMO_SAMPLE_ID = "demo"
_T0 = 1_760_000_000.0
_MODEL = "embedded/qwen2.5-coder-1.5b-instruct-q4_k_m"

EXTRACT_INSTRUCTION = (
    "You keep the long-term memory of a conversation between people. Read the new messages and write down "
    "the facts worth remembering about the speakers. Return a JSON list of strings."
)
DECIDE_INSTRUCTION = (
    "You maintain a memory store. Compare each new fact with the existing memories and decide one action "
    "per fact: ADD, UPDATE, DELETE or NONE. Return a JSON list of {event, id, text}."
)
DECIDE_INSTRUCTION_V2 = (
    "You maintain a memory store. Compare each new fact with the existing memories and decide one action "
    "per fact: ADD, UPDATE, DELETE or NONE. DELETE only when the new fact contradicts the memory; a fact "
    "about a different topic is an ADD, never a DELETE. Return a JSON list of {event, id, text}."
)
ANSWER_INSTRUCTION = "You answer a question about a long conversation, using only the memory given as context."

SESSIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("12 April 2021", [
        ("Odalys", "Hi Teo! I joined a sea-swimming club yesterday and the water was freezing."),
        ("Teodor", "Brave of you, Odalys! Will you keep going?"),
        ("Odalys", "Yes! I've been researching sailing schools, I want to learn to sail this summer."),
        ("Odalys", "Also, I started a new job at the Quillfeather Bookshop by the harbour, mornings only."),
        ("Teodor", "Congrats on the job! I still play cello in the evenings to unwind."),
        ("Odalys", "You and your cello! Let's catch up soon."),
    ]),
    ("29 April 2021", [
        ("Teodor", "Guess what, I carved a wooden fox for the garden last weekend!"),
        ("Teodor", "It was on 24 April, right before my kids woke up."),
        ("Odalys", "That sounds lovely. How are the two kids doing?"),
        ("Teodor", "Both are great, they love the new kitten."),
        ("Teodor", "We adopted a grey tabby named Marzipan, she climbs everything."),
        ("Odalys", "Marzipan! I can't wait to meet her."),
    ]),
    ("14 May 2021", [
        ("Odalys", "I've been taking glassblowing classes on weekends, it's absorbing."),
        ("Odalys", "The bookshop moved me to afternoons but I'm still there."),
        ("Teodor", "Glassblowing! My eldest wants to try it too."),
        ("Teodor", "My youngest is starting school in the autumn."),
        ("Odalys", "Time flies. Say hi to both kids for me."),
        ("Teodor", "Will do!"),
    ]),
]

# (qid, category, question, gold, prediction, evidence, correct, verdict or None, and where a replay tested the
# verdict its answer and whether it was right)
QUESTIONS: list[dict[str, Any]] = [
    {"qid": "demo-q1", "category": "single_hop", "question": "What did Odalys research?",
     "gold": "Sailing schools", "prediction": "sailing schools", "evidence": ["D1:3"], "correct": True},
    {"qid": "demo-q2", "category": "temporal", "question": "When did Teodor carve a wooden fox?",
     "gold": "24 April 2021", "prediction": ABSTAIN_ANSWER, "evidence": ["D2:1", "D2:2"],
     "correct": False, "blame": ("ExtractionError", "extract", 1),
     "reason": "The extraction for session 2 kept the kitten and the kids but dropped the carving on 24 April "
               "2021; no memory ever held it, so nothing downstream could recover it."},
    {"qid": "demo-q3", "category": "single_hop", "question": "Where does Odalys work?",
     "gold": "Quillfeather Bookshop", "prediction": ABSTAIN_ANSWER, "evidence": ["D1:4", "D3:2"],
     "correct": False, "blame": ("DeletionError", "decide", 2), "replay": ("Quillfeather Bookshop", True),
     "reason": "The update decision for session 3 deleted the memory 'Odalys works at the Quillfeather Bookshop' "
               "although the new fact (glassblowing classes) does not contradict it."},
    {"qid": "demo-q4", "category": "single_hop", "question": "What is the name of Teodor's cat?",
     "gold": "Marzipan", "prediction": ABSTAIN_ANSWER, "evidence": ["D2:5"],
     "correct": False, "blame": ("RetrievalError", "retrieve", None),
     "reason": "The memory 'Teodor adopted a grey tabby named Marzipan' was live but not among the top-k "
               "retrieved units for this question."},
    {"qid": "demo-q5", "category": "single_hop", "question": "What instrument does Teodor play?",
     "gold": "Cello", "prediction": "Guitar", "evidence": ["D1:5"],
     "correct": False, "blame": ("ResponseError", "answer", None),
     "reason": "The retrieved context says Teodor plays cello; the answer op replied 'Guitar'."},
    {"qid": "demo-q6", "category": "multi_hop", "question": "How many kids does Teodor have?",
     "gold": "Two", "prediction": "One", "evidence": ["D2:3", "D2:4", "D3:4"],
     "correct": False, "blame": ("UpdateError", "decide", 2), "replay": ("One", False),
     "reason": "The update decision merged 'youngest starts school' into the kids memory as "
               "'Teodor has one kid', overwriting the count of two."},
    {"qid": "demo-q7", "category": "open_domain", "question": "Would Odalys enjoy a <b>glassware</b> fair?",
     "gold": "Likely yes", "prediction": "No", "evidence": ["D3:1"], "correct": False, "blame": None,
     "reason": ""},
]

# facts each real session's extraction returns (session 2 drops the carving: the extraction error)
FACTS = [
    ["Odalys joined a sea-swimming club on 11 April 2021.", "Odalys researched sailing schools.",
     "Odalys works at the Quillfeather Bookshop.", "Teodor plays cello."],
    ["Teodor has two kids.", "Teodor adopted a grey tabby named Marzipan."],
    ["Odalys takes glassblowing classes on weekends.", "Teodor's youngest starts school in the autumn."],
]


@dataclass
class _GraphWriter:
    graph: nx.MultiDiGraph
    seq: int = 0
    clock: float = _T0
    units: dict[str, int] = field(default_factory=dict)
    next_unit: int = 1

    def op(self, name: str, inputs: list[str], outputs: dict[str, Any], *, predictor: str | None = None,
           instruction: str | None = None, args: dict[str, Any] | None = None, prompt: str = "",
           response: str = "", seconds: float = 0.05) -> str:
        op_id = f"op:{self.seq}"
        started = self.clock
        self.clock += seconds
        lm_calls = []
        if predictor:
            lm_calls.append({
                "model": _MODEL,
                "messages": [{"role": "system", "content": instruction}, {"role": "user", "content": prompt}],
                "response": response, "prompt_tokens": 180 + len(prompt) // 4,
                "completion_tokens": 20 + len(response) // 4, "seconds": round(seconds - 0.01, 3), "cached": False,
            })
        self.graph.add_node(op_id, kind="op", op=name, predictor=predictor, seq=self.seq, started_at=started,
                            ended_at=self.clock, inputs=args or {}, outputs={k: v for k, v in outputs.items()},
                            instructions=instruction, lm_calls=lm_calls, error=None, parent=None)
        for source in inputs:
            self.graph.add_edge(source, op_id, role="input")
        self.seq += 1
        self.clock += 0.002
        return op_id

    def var(self, op_id: str, name: str, value: Any, vtype: str) -> str:
        node = f"var:{op_id.split(':')[1]}:{name}"
        self.graph.add_node(node, kind="var", vtype=vtype, value=value)
        self.graph.add_edge(op_id, node, role="output")
        return node

    def mem(self, op_id: str, text: str, unit_id: str | None = None, deleted: bool = False) -> str:
        if unit_id is None:
            unit_id = f"m-{self.next_unit}"
            self.next_unit += 1
        version = self.units.get(unit_id, 0) + 1
        previous = f"mem:{unit_id}@{version - 1}" if version > 1 else None
        self.units[unit_id] = version
        node = f"mem:{unit_id}@{version}"
        self.graph.add_node(node, kind="var", vtype="memory", unit_id=unit_id, version=version, deleted=deleted,
                            value=text)
        if previous:
            self.graph.add_edge(previous, op_id, role="input")
        self.graph.add_edge(op_id, node, role="output")
        return node


def _memorize(w: _GraphWriter, session: int, date: str, turns: list[tuple[str, str]], facts: list[str],
              decisions: list[tuple[str, str | None, str]], read_units: list[str]) -> dict[str, str]:
    """One Mem0 window: extract -> search_similar -> update_decision -> apply. Returns text -> unit node."""
    ids = [f"turn:D{session}:{i}" for i in range(1, len(turns) + 1)]
    for node, (speaker, text) in zip(ids, turns, strict=True):
        w.graph.add_node(node, kind="var", vtype="turn", value=f"{speaker}: {text}", speaker=speaker)
    prompt = f"session_date: {date}\nnew_messages:\n" + "\n".join(f"{s}: {t}" for s, t in turns)
    extract = w.op("mem0.extract_facts", ids, {"facts": facts, "error": None}, predictor="extract_facts.predict",
                   instruction=EXTRACT_INSTRUCTION, args={"session_date": date, "messages": [t for _, t in turns]},
                   prompt=prompt, response=json.dumps(facts), seconds=0.9)
    facts_var = w.var(extract, "facts", facts, "fact")
    search = w.op("mem0.search_similar", [facts_var, *read_units], {"memories": read_units},
                  args={"facts": facts, "k": 5}, seconds=0.04)
    memories_var = w.var(search, "memories", [w.graph.nodes[u]["value"] for u in read_units], "retrieved")
    actions = [{"event": e, "unit_id": u, "text": t} for e, u, t in decisions]
    decide = w.op("mem0.update_decision", [facts_var, memories_var], {"memory_actions": actions},
                  predictor="update_decision.predict", instruction=DECIDE_INSTRUCTION,
                  args={"facts": facts, "memories": len(read_units)},
                  prompt=f"existing_memories: {json.dumps(w.graph.nodes[memories_var]['value'])}\nnew_facts: "
                         f"{json.dumps(facts)}", response=json.dumps(actions), seconds=0.7)
    actions_var = w.var(decide, "memory_actions", actions, "actions")
    apply = w.op("mem0.apply", [actions_var, *ids], {"added": [], "updated": [], "deleted": []},
                 args={"actions": actions, "session_date": date}, seconds=0.01)
    written: dict[str, str] = {}
    for event, unit_id, text in decisions:
        if event == "ADD":
            written[text] = w.mem(apply, text)
        elif event == "UPDATE":
            written[text] = w.mem(apply, text, unit_id=unit_id)
        elif event == "DELETE":
            last = f"mem:{unit_id}@{w.units[str(unit_id)]}"
            written[text] = w.mem(apply, w.graph.nodes[last]["value"], unit_id=unit_id, deleted=True)
    return written


def _filler(w: _GraphWriter, index: int, live: list[str]) -> list[str]:
    turns = [("Odalys", f"Filler chat {index}, part {i}: the weather, the news, weekend plans.") for i in range(1, 7)]
    session = 100 + index
    facts = [f"Odalys mentioned weekend plan #{index}."]
    new = _memorize(w, session, "6 May 2021", turns, facts, [("ADD", None, facts[0])], live[-5:])
    return list(new.values())


def _build_graph(filler_sessions: int) -> tuple[nx.MultiDiGraph, dict[str, str], dict[str, dict[str, Any]]]:
    graph = nx.MultiDiGraph(schema_version=1, system="mem0", dataset="demo", sample_id=DEMO_SAMPLE_ID,
                            models={"task": _MODEL}, instructions={"extract_facts.predict": EXTRACT_INSTRUCTION,
                                                                    "update_decision.predict": DECIDE_INSTRUCTION,
                                                                    "answer.predict": ANSWER_INSTRUCTION})
    w = _GraphWriter(graph)
    ops: dict[str, str] = {}
    s1 = _memorize(w, 1, SESSIONS[0][0], SESSIONS[0][1], FACTS[0], [("ADD", None, f) for f in FACTS[0]], [])
    live = list(s1.values())
    for i in range(filler_sessions // 2):
        live += _filler(w, i, live)
    ops["extract:1"] = f"op:{w.seq}"
    s2 = _memorize(w, 2, SESSIONS[1][0], SESSIONS[1][1], FACTS[1], [("ADD", None, f) for f in FACTS[1]],
                   live[:2])
    live += list(s2.values())
    for i in range(filler_sessions // 2, filler_sessions):
        live += _filler(w, i, live)
    bookshop, kids = s1[FACTS[0][2]], s2[FACTS[1][0]]
    bookshop_unit, kids_unit = graph.nodes[bookshop]["unit_id"], graph.nodes[kids]["unit_id"]
    ops["decide:2"] = f"op:{w.seq + 2}"
    s3 = _memorize(w, 3, SESSIONS[2][0], SESSIONS[2][1], FACTS[2],
              [("ADD", None, FACTS[2][0]), ("DELETE", bookshop_unit, "Odalys takes glassblowing classes."),
               ("UPDATE", kids_unit, "Teodor has one kid, starting school in the autumn.")], [bookshop, kids])
    current = {u: f"mem:{u}@{v}" for u, v in w.units.items()}
    answers: dict[str, dict[str, Any]] = {}
    retrieved_for = {
        "demo-q1": [s1[FACTS[0][1]]], "demo-q2": [s2[FACTS[1][1]]], "demo-q3": [current["m-1"]],
        "demo-q4": [current["m-1"], s1[FACTS[0][3]]], "demo-q5": [s1[FACTS[0][3]]],
        "demo-q6": [current[kids_unit]], "demo-q7": [s3[FACTS[2][0]]],
    }
    for q in QUESTIONS:
        qnode, ans = f"q:{q['qid']}", f"ans:{q['qid']}"
        graph.add_node(qnode, kind="var", vtype="question", value=q["question"])
        units = retrieved_for[q["qid"]]
        retrieve = w.op("mem0.retrieve", [qnode, *units], {"units": units}, args={"question": q["question"], "k": 10})
        units_var = w.var(retrieve, "units", [graph.nodes[u]["value"] for u in units], "retrieved")
        context = "\n".join(str(graph.nodes[u]["value"]) for u in units)
        answer = w.op("mem0.answer", [qnode, units_var], {"answer": q["prediction"], "error": None},
                      predictor="answer.predict", instruction=ANSWER_INSTRUCTION,
                      args={"question": q["question"], "context": context},
                      prompt=f"context:\n{context}\nquestion: {q['question']}", response=q["prediction"], seconds=0.4)
        graph.add_node(ans, kind="var", vtype="answer", value=q["prediction"])
        graph.add_edge(answer, ans, role="output")
        answers[q["qid"]] = {"retrieve": retrieve, "answer": answer}
    return graph, ops, answers


def _blamed_op(blame: tuple[str, str, int | None], ops: dict[str, str], answer_ops: dict[str, str]) -> str:
    _, kind, session = blame
    if kind in ("retrieve", "answer"):
        return answer_ops[kind]
    return ops[f"{kind}:{session}"]


def write_demo_run(root: str | Path, *, filler_sessions: int = 0, optimize: bool = True) -> Path:
    """Writes the demo run directory at `root` (created) and returns it."""
    root = Path(root)
    (root / "graphs").mkdir(parents=True, exist_ok=True)
    graph, ops, answers = _build_graph(filler_sessions)
    graph_rel = f"graphs/{DEMO_SAMPLE_ID}.json"
    (root / graph_rel).write_text(json.dumps(nx.node_link_data(graph, edges="edges"), indent=1), encoding="utf-8")
    cases: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    for q in QUESTIONS:
        case_id = f"mem0/demo/{q['qid']}"
        f1 = 1.0 if q["correct"] else 0.0
        cases.append({
            "schema_version": 1, "case_id": case_id, "system": "mem0", "dataset": "demo",
            "sample_id": DEMO_SAMPLE_ID, "question_id": q["qid"], "question": q["question"], "gold": q["gold"],
            "prediction": q["prediction"], "category": q["category"], "evidence": q["evidence"],
            "abstention": False, "scores": {"f1": f1, "bleu1": f1, "judge": f1}, "correct": q["correct"],
            "graph": graph_rel, "error": None,
        })
        if q["correct"]:
            continue
        cost = {"lm_calls": 2, "prompt_tokens": 1900, "completion_tokens": 120, "seconds": 3.1}
        blame = q.get("blame")
        if blame is None:
            verdicts.append({"case_id": case_id, "method": "llm", "error_type": None, "op_id": None, "op": None,
                             "predictor": None, "reason": "", "confidence": None, "cost": cost,
                             "error": "judge reply did not parse after one retry"})
            continue
        op_id = _blamed_op(blame, ops, answers[q["qid"]])
        node = graph.nodes[op_id]
        verdict = {"case_id": case_id, "method": "llm", "error_type": blame[0], "op_id": op_id,
                   "op": node["op"], "predictor": node["predictor"], "reason": q["reason"],
                   "confidence": 0.8, "cost": cost, "error": None}
        if "replay" in q:  # a replay of the blamed op's repair confirmed the verdict, or did not
            answer, saved = q["replay"]
            verdict.update(confirmed=saved, replays=[{"op_id": op_id, "op": node["op"], "answer": answer,
                                                      "correct": saved}],
                           cost={**cost, "replay_calls": 6, "replay_prompt_tokens": 5400,
                                 "replay_completion_tokens": 310})
        verdicts.append(verdict)
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    (root / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts), encoding="utf-8")
    config = {
        "schema_version": 1, "system": "mem0", "dataset": "demo",
        "data": {"path": "demo_conversation.json", "conversations": [DEMO_SAMPLE_ID], "questions": 7},
        "models": {role: {"model": _MODEL, "api_base": None} for role in ("task", "judge", "reflection", "attributor")},
        "program": {"top_k": 10, "window_turns": 6, "similar_k": 5, "embedder": "minilm"},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    (root / "manifest.json").write_text(json.dumps(_manifest(optimize), indent=2, sort_keys=True) + "\n",
                                        encoding="utf-8")
    if optimize:
        (root / "program.json").write_text(json.dumps({"update_decision.predict": {
            "signature": {"instructions": DECIDE_INSTRUCTION_V2}}}, indent=2) + "\n", encoding="utf-8")
    return root


def _manifest(optimize: bool) -> dict[str, Any]:
    usage = {
        "task": {"calls": 23, "prompt_tokens": 9120, "completion_tokens": 1310, "seconds": 14.2, "cache_hits": 2,
                 "failures": 0},
        "judge": {"calls": 7, "prompt_tokens": 2100, "completion_tokens": 70, "seconds": 3.3, "cache_hits": 0,
                  "failures": 0},
        "attributor": {"calls": 12, "prompt_tokens": 11400, "completion_tokens": 720, "seconds": 18.6,
                       "cache_hits": 0, "failures": 1},
    }
    manifest: dict[str, Any] = {
        "schema_version": 1, "versions": {"memtrace_opt": "0.1.0", "dspy": "3.4.1"},
        "started_at": "2025-10-09T08:53:20Z", "ended_at": "2025-10-09T08:54:31Z", "seconds": 71.0, "usage": usage,
        "counts": {"conversations": 1, "questions": 7, "correct": 1, "op_failures": 0},
        "accuracy": {
            "overall": {"count": 7, "f1": 0.143, "bleu1": 0.143, "judge": 0.143, "accuracy": 0.143},
            "by_category": {
                "single_hop": {"count": 4, "f1": 0.25, "bleu1": 0.25, "judge": 0.25, "accuracy": 0.25},
                "temporal": {"count": 1, "f1": 0.0, "bleu1": 0.0, "judge": 0.0, "accuracy": 0.0},
                "multi_hop": {"count": 1, "f1": 0.0, "bleu1": 0.0, "judge": 0.0, "accuracy": 0.0},
                "open_domain": {"count": 1, "f1": 0.0, "bleu1": 0.0, "judge": 0.0, "accuracy": 0.0},
            },
        },
    }
    if optimize:
        usage["reflection"] = {"calls": 6, "prompt_tokens": 8800, "completion_tokens": 1900, "seconds": 21.0,
                               "cache_hits": 0, "failures": 0}
        manifest["baseline"] = {"val_accuracy": 0.30}
        manifest["optimizer"] = {
            "name": "memtrace", "stop_reason": "budget", "best_val_accuracy": 0.36, "lm_calls": 200,
            "interrupted": {"round": 3, "phase": "validation", "why": "cut short: LM-call budget of 200 spent (200 calls)",
                            "lm_calls": 38, "seconds": 41.5, "chosen_predictor": "answer.predict",
                            "blame_counts": {"answer.predict": 2}, "not_fixable": {"mem0.retrieve": 1}, "findings": [],
                            "repairs": {"tried": 2, "no_repair": 1, "not_confirmed": 0, "lineage_rejected": 0,
                                        "no_demo": 0, "kept": 1, "lm_calls": 6, "confirmed": 1},
                            "local_set": {"predictor": "answer.predict", "role": "answers", "calls": 6, "targets": 4,
                                          "seed_carried": 2, "excluded": {}},
                            "candidates": [{"instruction": ANSWER_INSTRUCTION + " Answer with the date itself.",
                                            "minibatch_score": 0.5},
                                           {"instruction": "Answer in one word.", "minibatch_score": None}]},
        }
        manifest["rounds"] = [
            {"round": 1, "blame_counts": {"update_decision.predict": 2, "extract_facts.predict": 1,
                                          "answer.predict": 1},
             "not_fixable": {"mem0.retrieve": 1}, "chosen_predictor": "update_decision.predict",
             "previous_instruction": DECIDE_INSTRUCTION,
             "candidates": [
                 {"instruction": DECIDE_INSTRUCTION_V2, "minibatch_score": 0.5, "val_score": 0.36, "accepted": True,
                  "why": "val 0.36 > 0.30 (best so far)"},
                 {"instruction": DECIDE_INSTRUCTION + " Prefer UPDATE over DELETE.", "minibatch_score": 0.25,
                  "val_score": None, "accepted": False, "why": "minibatch 0.25 did not beat 0.25"},
             ],
             "accepted": True, "val_accuracy": 0.36, "lm_calls": 96},
            {"round": 2, "blame_counts": {"extract_facts.predict": 2, "answer.predict": 1},
             "not_fixable": {}, "chosen_predictor": "extract_facts.predict",
             "previous_instruction": EXTRACT_INSTRUCTION,
             "candidates": [
                 {"instruction": EXTRACT_INSTRUCTION + " Always keep dated events with their absolute date.",
                  "minibatch_score": 0.5, "val_score": 0.34, "accepted": False, "why": "val 0.34 <= 0.36",
                  "local": {"blamed": 2, "fixed": 2, "kept": 1, "broken": 0, "lm_calls": 3}},
                 {"instruction": "Write short notes.", "minibatch_score": None, "val_score": None,
                  "accepted": False, "why": "rejected by the local check: 0 of 2 blamed calls now carry the gold "
                  "answer, 0 of 0 correct cases' calls lose it",
                  "local": {"blamed": 2, "fixed": 0, "kept": 0, "broken": 0, "lm_calls": 2}},
                 {"instruction": EXTRACT_INSTRUCTION, "minibatch_score": 0.25, "val_score": None, "accepted": False,
                  "why": "rejected: minibatch 0.250 does not beat the current 0.500",
                  "local": {"blamed": 2, "fixed": 1, "kept": 1, "broken": 0, "lm_calls": 3},
                  "demos": [{"session_date": "12 April 2021", "earlier_messages": "(none)",
                             "new_messages": "Odalys: I joined a sea-swimming club yesterday.",
                             "facts": '["Odalys joined a sea-swimming club on 11 April 2021."]'}]},
             ],
             "accepted": False, "val_accuracy": 0.36, "lm_calls": 88},
        ]
    return manifest
