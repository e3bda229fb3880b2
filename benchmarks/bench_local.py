"""The ceiling of prompt optimization on one step: each predictor's local set (its calls in a traced run of the
training questions that read a question's evidence, each with the information it should carry), the seed's local
score, and the best local score each kind of candidate reaches on calls it was not made from.

The local set's calls are split in two by a seeded shuffle: candidates are made from the first half only
(the reflection LM is shown its calls, demos are taken from them) and every candidate is scored on the second
half, so no candidate is judged on a call it copies. Sources, as the loop's own:

- `reflection`: the reflection LM's rewrites (rules added, then whole instructions), shown up to three calls that
  lost their information and three that carried it;
- `demos`: worked examples bootstrapped from calls whose seed reply carried every target;
- `repair demos`: calls that lost a target, their reply with the evidence turns written as facts by rule (not
  confirmed by replay here: the loop confirms its repairs);
- `combined`: the best rewrite with the demos.

    python benchmarks/bench_local.py --system mem0 --sessions 1-3 --train conv-30,conv-43 \\
        --predictors extract_facts,update_decision --out runs/bench-local
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtrace_opt.benchmarks.split_args import DATA, usage_errors


@dataclass
class Row:
    predictor: str
    source: str
    label: str
    score: Any  # LocalScore
    seconds: float


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", default="mem0")
    parser.add_argument("--data", default=str(DATA), help="a LoCoMo-format file (default: ../shared/data)")
    parser.add_argument("--train", default="conv-30,conv-43", help="the training conversations")
    parser.add_argument("--sessions", default="1-3")
    parser.add_argument("--categories", default="single-hop,multi-hop,temporal,open-domain")
    parser.add_argument("--predictors", default="extract_facts,update_decision",
                        help="comma-separated predictor names or their op's name (extract_facts)")
    parser.add_argument("--candidates", type=int, default=3, help="reflection proposals per predictor")
    parser.add_argument("--demos", type=int, default=2, help="demos per demos candidate")
    parser.add_argument("--max-calls", type=int, default=None, help="at most N calls in each local set")
    parser.add_argument("--lm", default="embedded")
    parser.add_argument("--reflection-lm", default=None, help="default: the task model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="a folder for results.json")
    return parser.parse_args(argv)


@usage_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    import dspy

    from memtrace_opt.cli.common import data_slice
    from memtrace_opt.data import load_data
    from memtrace_opt.lm.models import Models
    from memtrace_opt.lm.roles import ModelRoles, ModelSpec
    from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator
    from memtrace_opt.optimizers.evaluation.examples import case_refs, make_examples
    from memtrace_opt.optimizers.evaluation.local_set import build_local_set
    from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
    from memtrace_opt.optimizers.evaluation.splits import parse_ids
    from memtrace_opt.programs import make_program

    samples = parse_ids(args.train)
    dataset = load_data(args.data, data_slice(args.sessions, [c for c in args.categories.split(",") if c]))
    conversations = [c for c in dataset.conversations if c.sample_id in samples]
    if not conversations:
        print(f"no conversation {args.train} in {args.data}", file=sys.stderr)
        return 2
    roles = ModelRoles(task=ModelSpec(args.lm), reflection=ModelSpec(args.reflection_lm or args.lm))
    models = Models.from_roles(roles)
    program = make_program(args.system)
    evaluator = CachedEvaluator(AnswerMetric(), task_lm=models.task, meta={"system": args.system})
    started = time.perf_counter()
    with dspy.context(lm=models.task):
        traced = evaluator.evaluate(program, case_refs(make_examples(conversations)))
    print(f"{args.system} on {', '.join(samples)} sessions {args.sessions}: {len(traced.cases)} training questions, "
          f"accuracy {traced.accuracy:.3f}, traced in {time.perf_counter() - started:.0f} s\n", flush=True)
    rows: list[Row] = []
    summaries = {}
    for wanted in parse_ids(args.predictors):
        predictor = next((name for name, _ in program.named_predictors() if name.split(".")[0] == wanted or name == wanted),
                         None)
        if predictor is None:
            print(f"{args.system} has no predictor {wanted}", file=sys.stderr)
            return 2
        local = build_local_set(program, predictor, traced, evaluator.memo, max_calls=args.max_calls)
        summaries[predictor] = local.summary()
        print(f"{predictor}: {len(local.calls)} calls, {local.size} targets, seed carries {local.seed_carried}; "
              f"left out: {dict(local.excluded) or 'none'}", flush=True)
        if len(local.calls) < 2:
            continue
        with dspy.context(lm=models.task):
            rows += measure(args, program, predictor, local, traced, evaluator.memo, models)
    print_table(rows)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({
            "args": vars(args), "local_sets": summaries,
            "rows": [{"predictor": r.predictor, "source": r.source, "label": r.label, "seconds": round(r.seconds, 1),
                      **r.score.to_dict()} for r in rows]}, indent=2), encoding="utf-8")
    return 0


def measure(args: argparse.Namespace, program: Any, predictor: str, local: Any, traced: Any, memo: Any,
            models: Any) -> list[Row]:
    """Every source's candidates for `predictor`, made from half of the local set and scored on the other half."""
    from memtrace_opt.optimizers.core.candidate import Candidate
    from memtrace_opt.optimizers.core.program_io import instructions_of
    from memtrace_opt.optimizers.gates.local_objective import LocalObjective

    keys = [call.key for call in local.calls]
    random.Random(args.seed).shuffle(keys)
    made_from = tuple(sorted(keys[: len(keys) // 2]))
    own = [call for call in local.calls if call.key in made_from]
    seed_instruction = instructions_of(program)[predictor]
    objective = LocalObjective(local, program, models.task)
    signature = dict(program.named_predictors())[predictor].signature

    candidates: list[tuple[str, str, Any]] = [("seed", "the seed instruction",
                                                Candidate.of(predictor, seed_instruction, built_from=made_from))]
    started = time.perf_counter()
    for i, text in enumerate(reflection(own, predictor, seed_instruction, models.reflection, args.candidates)):
        candidates.append(("reflection", f"rewrite {i + 1}", Candidate.of(predictor, text, built_from=made_from)))
    print(f"  reflection: {len(candidates) - 1} proposals in {time.perf_counter() - started:.0f} s", flush=True)
    demos = bootstrapped(own, signature, args.demos)
    if demos:
        candidates.append(("demos", f"{len(demos)} bootstrapped demos",
                           Candidate.of(predictor, seed_instruction, demos, "demos", made_from)))
    repaired = repair_demos(own, program, predictor, traced, local.role, args.demos)
    if repaired:
        candidates.append(("repair demos", f"{len(repaired)} rule-repair demos",
                           Candidate.of(predictor, seed_instruction, repaired, "repair", made_from)))
    rows = []
    for source, label, candidate in candidates:
        started = time.perf_counter()
        score = objective.score(program, candidate)
        rows.append(Row(predictor, source, label, score, time.perf_counter() - started))
        print(f"  {source}: {label}: {score.why}", flush=True)
    rewrites = [r for r in rows if r.source == "reflection"]
    if rewrites and (demos or repaired):
        best = max(rewrites, key=lambda r: (r.score.gain, -r.score.lost))
        text = next(c.instruction for s, lbl, c in candidates if s == "reflection" and lbl == best.label)
        started = time.perf_counter()
        candidate = Candidate.of(predictor, text, demos or repaired, "combined", made_from)
        score = objective.score(program, candidate)
        rows.append(Row(predictor, "combined", f"{best.label} + demos", score, time.perf_counter() - started))
        print(f"  combined: {score.why}", flush=True)
    return rows


def reflection(calls: list[Any], predictor: str, instruction: str, lm: Any, k: int) -> list[str]:
    """The reflection LM's proposals, shown the calls that lost a target and those that carried every one."""
    from memtrace_opt.optimizers.core.evidence import OpEvidence, ProposalEvidence, without_adapter_tail
    from memtrace_opt.optimizers.sources.reflective import ReflectiveProposer

    def shown(call: Any, target: Any) -> OpEvidence:
        return OpEvidence(target.case_id, target.question, target.gold, "", without_adapter_tail(call.prompt).strip(),
                          call.response, "this call's output does not hold the gold answer's information")

    failures = [shown(c, t) for c in calls for t, ok in zip(c.targets, c.seed_carried, strict=True) if not ok]
    successes = [shown(c, c.targets[0]) for c in calls if all(c.seed_carried)]
    evidence = ProposalEvidence(predictor, predictor.split(".")[0], instruction, tuple(failures[:3]), tuple(successes[:3]))
    return ReflectiveProposer(lm=lm, pattern_rules=False).propose(evidence, k)


def bootstrapped(calls: list[Any], signature: Any, n: int) -> list[dict[str, str]]:
    """Demos from the calls whose seed reply carried every target, most targets first."""
    from memtrace_opt.optimizers.sources.demos import demo_from_exchange

    carrying = sorted((c for c in calls if all(c.seed_carried)), key=lambda c: -len(c.targets))
    demos = [d for c in carrying if (d := demo_from_exchange(signature, c.prompt, c.response)) is not None]
    return demos[:n]


def repair_demos(calls: list[Any], program: Any, predictor: str, traced: Any, role: Any,
                 n: int) -> list[dict[str, str]]:
    """For a forming op with one list output: calls that lost a target, their reply with the target's evidence
    turns added as facts."""
    from memtrace_opt.attribution import GraphView
    from memtrace_opt.memory import OpRole
    from memtrace_opt.optimizers.core.evidence import prompt_fields
    from memtrace_opt.optimizers.evaluation.evidence import GraphCache
    from memtrace_opt.optimizers.evaluation.local_set import ReplyReader
    from memtrace_opt.optimizers.evaluation.repairs import as_fact

    reader = ReplyReader(program, predictor)
    signature = reader.signature
    if role is not OpRole.FORMS or len(signature.output_fields) != 1:
        return []
    field = next(iter(signature.output_fields))
    graphs = GraphCache(traced)
    cases = traced.by_id()
    demos = []
    for call in calls:
        lost = [t for t, ok in zip(call.targets, call.seed_carried, strict=True) if not ok]
        fields = prompt_fields(call.prompt)
        if not lost or not all(name in fields for name in signature.input_fields):
            continue
        view = GraphView(graphs.get(call.key.rsplit("/", 1)[0]))
        written = (reader.outputs(call.response) or {}).get(field)
        facts = [str(f) for f in written] if isinstance(written, list) else []
        for target in lost:
            for dia in cases[target.case_id].question.evidence:
                node = f"turn:{dia}"
                if node in view.graph:
                    value = view.attrs(node).get("value")
                    value = value if isinstance(value, dict) else {}
                    facts.append(as_fact(str(value.get("speaker") or ""), view.turn_text(node), value.get("timestamp")))
        demos.append({**{name: fields[name] for name in signature.input_fields},
                      field: json.dumps(list(dict.fromkeys(facts)), ensure_ascii=False)})
        if len(demos) >= n:
            break
    return demos


def print_table(rows: list[Row]) -> None:
    print("\n| predictor | source | candidate | carried on held-out calls | seed | fixed | lost | bloat | calls | "
          "LM calls | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r.score
        print(f"| {r.predictor} | {r.source} | {r.label} | {s.carried}/{s.targets} | {s.seed_carried} | {s.fixed} | "
              f"{s.lost} | {s.bloat} | {s.calls} | {s.lm_calls} | {r.seconds:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
