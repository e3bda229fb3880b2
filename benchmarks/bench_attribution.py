"""Attribution accuracy on MemTraceBench: build a bench on a fixed LoCoMo + LongMemEval slice, score every method.

    python benchmarks/bench_attribution.py                                   # embedded model, all systems
    python benchmarks/bench_attribution.py --lm fake --embedder hash         # a dry run in seconds
    python benchmarks/bench_attribution.py --out runs/attr --eval-only       # re-score a bench already built
    python benchmarks/bench_attribution.py --lm openai/gpt-4.1-mini --attributor-lm openai/gpt-4.1

1. Builds one bench per part (LoCoMo conv-26 sessions 1-3; a few LongMemEval oracle questions, one per kind of
   question; the packaged sample conversation, Mem0 only: its knowledge updates give Mem0's update and
   deletion faults) with every system: faults of each error type injected into questions the system got right and
   replayed, kept when the answer turns wrong (`source: injected`, the truth known); with --natural also the
   systems' own failures labelled by the lineage rules (silver labels).
2. Runs every attribution method on every case (the task model replays for `counterfactual`, and for graphtrace's
   confirmation unless --no-confirm; the attributor model answers the LM methods' questions) and scores the
   verdicts against the labels. Scores of methods not
   asked for this time stay in the table when results.json under --out holds the same cases, so methods can
   be scored in separate runs.
3. Prints, per method: cases, error-type and op-level accuracy on the injected cases (and on all), median and
   total attributor LM calls and median attributor tokens per case, beside them the task model's replayed calls
   (median and total per case) and the upstream verdicts a replay confirmed (share, and true / false / none
   counts), seconds; then the targets: graphtrace >= 90% op-level and >= 95% error-type accuracy on injected
   cases, every baseline beaten by >= 20 points op-level, median <= 8 LM calls and <= 12k tokens per case. The
   cost target counts the attributor's questions only: the replays (graphtrace's confirmation, counterfactual)
   are the task model's calls, reported beside it and in the target's line, never in it. Writes `results.json`
   and `results.md` under --out (with --no-gold-evidence, the methods do not see the gold evidence ids and work
   from pseudo-evidence: `results-pseudo.json` / `.md`).

With `--split dev` or `--split test`, nothing is built: that human-labelled split (a bench of natural failures a
person labelled, `source: human`, kept in the repository with its graphs; `--split-dir` names another) is copied
under --out and every method is scored on it with the attributor model (by default the embedded one). `dev` is
where attribution was developed and tuned; `test` is held out: its labels were written before any method ran on
it, and nothing is tuned on it (docs/labelling.md). Report the two separately. `--split human` is the old name of
`dev` and still works. The targets there: graphtrace and counterfactual >= 90% op-level and >= 90% error type, above lineage (which needs
no LM), >= 20 points above all_at_once, step_by_step and binary_search op-level, median <= 8 attributor LM
calls and <= 12k attributor tokens per case (the replays beside them). results.md then lists every miss: the
label, with its rationale, and what the method answered, with its reason.

The systems run through DSPy's cache: building again with the same model and slice re-uses every LM reply.
Exit status 0 when every target is met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memtrace_opt import progress  # noqa: E402
from memtrace_opt.attribution import AttributionConfig, LMAnswerJudge, method_names  # noqa: E402
from memtrace_opt.attribution.runs import read_verdicts  # noqa: E402
from memtrace_opt.benchmarks.memtracebench import BuildRequest, build_bench, eval_bench, load_bench  # noqa: E402
from memtrace_opt.benchmarks.memtracebench.costs import Confirmation  # noqa: E402
from memtrace_opt.benchmarks.memtracebench.evaluate import case_hits, eval_dir, score_verdicts  # noqa: E402
from memtrace_opt.benchmarks.progress_display import with_progress  # noqa: E402
from memtrace_opt.data import DataSlice  # noqa: E402
from memtrace_opt.lm.models import Models  # noqa: E402
from memtrace_opt.lm.roles import ModelRoles, ModelSpec  # noqa: E402

SYSTEMS = ("long_context", "rag", "mem0", "evermemos")
# LongMemEval oracle questions, the shortest of their kind (each one is its own conversation)
LME_SAMPLES = ("66f24dbb", "0f05491a")  # single-session-user, knowledge-update
BASELINES = ("all_at_once", "step_by_step", "binary_search", "random", "blame_response", "lineage")
# the labelled splits: natural failures labelled by a person, kept in the repository as benches with their graphs;
# dev is where attribution was developed, test is held out (never tuned on)
SPLITS_DIR = Path(__file__).resolve().parent / "memtracebench" / "splits"
LABELLED_SPLITS = ("dev", "test")
SPLIT_ALIASES = {"human": "dev"}  # the dev split's old name
HUMAN_METHODS = ("graphtrace", "counterfactual")
HUMAN_BASELINES = ("all_at_once", "step_by_step", "binary_search")


def parts(args: argparse.Namespace) -> list[tuple[str, str, DataSlice, bool, tuple[str, ...]]]:
    """(name, data spec, slice, gold cases, systems) of each bench part. The packaged sample conversation (a
    move, a cancelled trip) is where Mem0's decisions UPDATE and DELETE what later questions need: it adds
    Mem0's update and deletion faults, which the LoCoMo slice rarely gives."""
    systems = tuple(args.systems.split(","))
    if args.split in LABELLED_SPLITS:
        return [(args.split, "", DataSlice(), False, ())]
    if args.data == "sample":
        return [("sample", "sample", DataSlice(), True, systems)]
    return [
        ("locomo", "locomo", DataSlice(sample_ids=(args.locomo_sample,), sessions=(1, args.locomo_sessions)), True,
         systems),
        ("longmemeval", "longmemeval", DataSlice(sample_ids=tuple(args.lme_samples.split(","))), False, systems),
        ("sample", "sample", DataSlice(), False, tuple(s for s in systems if s == "mem0")),
    ]


def copy_split(source: Path, out: Path) -> None:
    """The split's cases, manifest and graphs under `out` (verdicts go there, not into the repository); a copy
    already there is refreshed, its verdicts kept."""
    if not (source / "cases.jsonl").is_file():
        raise SystemExit(f"error: {source}: no labelled split (cases.jsonl) there; make one with `memtrace serve` and "
                         "`memtrace bench import`, or name it with --split-dir")
    shutil.copytree(source, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("eval", "eval-pseudo"))


def build(args: argparse.Namespace, models: Models) -> None:
    for name, data, data_slice, gold, systems in parts(args):
        if not systems:
            continue
        settings = {s: {"embedder": args.embedder} for s in systems} if args.embedder != "minilm" else {}
        began = time.time()
        request = BuildRequest(systems=systems, out=args.out / name, data=data, data_slice=data_slice, settings=settings,
                               per_kind=args.per_kind, natural=args.natural, gold=gold and args.natural,
                               embedder=args.embedder)
        summary = build_bench(request, task_lm=models.task, progress=lambda m, name=name: print(f"  [{name}] {m}", flush=True))
        print(f"built {name}: {summary.cases} cases in {time.time() - began:.0f}s {json.dumps(summary.counts)}", flush=True)


def pick(cases: list[Any], most: int | None) -> list[Any]:
    """At most `most` cases, spread evenly: round robin over the (source, dataset, system, error type) groups,
    taken in turn from each (dataset, system) first, so a small sample reaches every system and dataset
    before a second error type of any; each group in bench order. All of them when `most` is None."""
    if most is None or len(cases) <= most:
        return list(cases)
    groups: dict[tuple[str, str, str, str], list[Any]] = {}
    for case in cases:
        groups.setdefault((case.label.source, case.dataset, case.system, case.label.error_type), []).append(case)
    by_owner: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
    for key in groups:
        by_owner.setdefault((key[1], key[2]), []).append(key)
    keys = [owned[i] for i in range(max(map(len, by_owner.values()))) for owned in by_owner.values() if i < len(owned)]
    picked: list[Any] = []
    while len(picked) < most:
        for key in keys:
            if groups[key] and len(picked) < most:
                picked.append(groups[key].pop(0))
    order = {id(c): i for i, c in enumerate(cases)}
    return sorted(picked, key=lambda c: order[id(c)])


def _source(score: Any, source: str) -> dict[str, Any]:
    part = score.by_source.get(source)
    return {"n": part.n if part else 0, "type_acc": part.rate(part.type_hits) if part else 0.0,
            "op_acc": part.rate(part.op_hits) if part else 0.0}


def misses(cases: list[Any], verdicts: list[Any]) -> list[dict[str, Any]]:
    """Every case the method got wrong (error type or op): the label with its rationale and what the method said."""
    by_id = {v.case_id: v for v in verdicts}
    found = []
    for case in cases:
        verdict = by_id.get(case.case_id)
        if verdict is not None and all(case_hits(case, verdict)):
            continue
        found.append({"case_id": case.case_id, "label": {"error_type": case.label.error_type, "ops": list(case.label.ops),
                                                         "rationale": case.label.rationale},
                      "verdict": ({"error_type": verdict.error_type, "op_id": verdict.op_id, "op": verdict.op,
                                   "reason": verdict.reason, "error": verdict.error} if verdict else None)})
    return found


def score_method(method: str, cases: list[Any], verdicts: list[Any], seconds: float) -> dict[str, Any]:
    """The method's scores; its cost per case: the attributor's LM calls and tokens (`median_lm_calls`,
    `median_tokens`, `total_lm_calls`: what the cost target is on), the task model's replayed calls
    (`median_replay_calls`, `total_replay_calls`) and the upstream verdicts' `confirmed` counts."""
    score = score_verdicts(method, cases, verdicts)
    costs = score.costs
    human = [c for c in cases if c.label.source == "human"]
    return {
        "score": score.to_dict(),
        "injected": _source(score, "injected"),
        "human": _source(score, "human"),
        "misses_human": misses(human, verdicts),
        "median_lm_calls": costs.median_lm_calls,
        "median_tokens": costs.median_tokens,
        "total_lm_calls": costs.total_lm_calls,
        "median_replay_calls": costs.median_replay_calls,
        "total_replay_calls": costs.total_replay_calls,
        "confirmed": costs.confirmation.to_dict(),
        "seconds": round(seconds, 1),
        "errors": score.errors,
    }


def results_name(args: argparse.Namespace) -> str:
    """`results` (gold evidence shown to the methods) or `results-pseudo` (hidden: pseudo-evidence)."""
    return "results-pseudo" if args.no_gold_evidence else "results"


def case_ticker(name: str, every: int = 5, quiet_s: float = 60.0,
                clock: Callable[[], float] = time.monotonic) -> Callable[[str, int, int], None]:
    """A progress line `[name] method done/total` every `every` cases, at the last, and for any case that ends
    more than `quiet_s` seconds after the last line (a case with replays can take minutes), with its seconds."""
    last = [clock()]

    def tick(method: str, done: int, total: int) -> None:
        now = clock()
        slow = now - last[0] > quiet_s
        if done == total or done % every == 0 or slow:
            took = f" ({now - last[0]:.0f} s since the last line)" if slow else ""
            print(f"  [{name}] {method} {done}/{total}{took}", flush=True)
            last[0] = now

    return tick


def evaluate(args: argparse.Namespace, models: Models, methods: list[str], save: Any) -> dict[str, Any]:
    """Every method on the chosen cases of every part; the results are saved after each method (`save`)."""
    config = AttributionConfig(embedder=args.embedder, max_lm_calls=args.max_calls, confirm=not args.no_confirm,
                               judge_evidence=args.judge_evidence)
    loaded = [(name, args.out / name) for name, *_ in parts(args) if (args.out / name / "cases.jsonl").exists()]
    systems = set(args.systems.split(","))  # a labelled split holds every system's cases: keep those asked for
    every = [c for _, root in loaded for c in load_bench(root)[1] if c.system in systems]
    cases = pick(every, args.max_cases)
    chosen = {c.case_id for c in cases}
    results: dict[str, Any] = {"cases": len(cases), "case_ids": sorted(chosen), "methods": {}}
    earlier = args.out / f"{results_name(args)}.json"
    if earlier.exists():  # scores of other methods on the same cases stay in the table
        previous = json.loads(earlier.read_text(encoding="utf-8"))
        if previous.get("case_ids") == results["case_ids"]:
            results["methods"] = {m: r for m, r in previous.get("methods", {}).items() if m not in methods}
    for method in methods:
        began = time.time()
        verdicts = []
        for name, root in loaded:
            eval_bench(root, [method], lm=models.attributor, task_lm=models.task, config=config, case_ids=chosen,
                       judge=LMAnswerJudge(models.judge) if args.judge_lm else None,
                       gold_evidence=not args.no_gold_evidence,
                       progress=case_ticker(name))
            verdicts += read_verdicts(root / eval_dir(not args.no_gold_evidence) / f"{method}.jsonl")
        results["methods"][method] = score_method(method, cases, verdicts, time.time() - began)
        save(results)
    return results


def cost_targets(name: str, r: dict[str, Any]) -> list[tuple[str, bool]]:
    """The cost targets: the attributor's questions per case (median); the task model's replayed calls beside them
    in the line, not in the target."""
    replays = f" (replays apart: median {r.get('median_replay_calls', 0):g} task-model calls a case)"
    return [
        (f"{name} median {r['median_lm_calls']} attributor LM calls <= 8 per case{replays}", r["median_lm_calls"] <= 8),
        (f"{name} median {r['median_tokens']:.0f} attributor tokens <= 12k per case", r["median_tokens"] <= 12_000),
    ]


def human_targets(results: dict[str, Any]) -> list[tuple[str, bool]]:
    """The targets on a labelled split (see the module docstring), for graphtrace and counterfactual."""
    methods = results["methods"]
    checks = []
    for name in (m for m in HUMAN_METHODS if m in methods):
        r = methods[name]
        op, kind = r["human"]["op_acc"], r["human"]["type_acc"]
        checks += [
            (f"{name} op-level on human labels {100 * op:.1f}% >= 90%", op >= 0.9),
            (f"{name} error type on human labels {100 * kind:.1f}% >= 90%", kind >= 0.9),
            *cost_targets(name, r),
        ]
        if "lineage" in methods:
            gap = 100 * (op - methods["lineage"]["human"]["op_acc"])
            checks.append((f"{name} above lineage by {gap:+.1f} points op-level (> 0)", gap > 0))
        for baseline in (b for b in HUMAN_BASELINES if b in methods):
            gap = 100 * (op - methods[baseline]["human"]["op_acc"])
            checks.append((f"{name} beats {baseline} by {gap:+.1f} points op-level (>= 20)", gap >= 20))
    return checks


def targets(results: dict[str, Any], split: str = "built") -> list[tuple[str, bool]]:
    if split in LABELLED_SPLITS:
        return human_targets(results)
    methods = results["methods"]
    if "graphtrace" not in methods:
        return []
    g = methods["graphtrace"]
    checks = [
        (f"graphtrace op-level on injected {100 * g['injected']['op_acc']:.1f}% >= 90%", g["injected"]["op_acc"] >= 0.9),
        (f"graphtrace error type on injected {100 * g['injected']['type_acc']:.1f}% >= 95%", g["injected"]["type_acc"] >= 0.95),
        *cost_targets("graphtrace", g),
    ]
    for name in BASELINES:
        if name in methods:
            gap = 100 * (g["injected"]["op_acc"] - methods[name]["injected"]["op_acc"])
            checks.append((f"graphtrace beats {name} by {gap:+.1f} points op-level (>= 20)", gap >= 20))
    return checks


def table(results: dict[str, Any], split: str = "built") -> str:
    source, short = ("human", "hum") if split in LABELLED_SPLITS else ("injected", "inj")
    header = ["method", "cases", source, f"type acc ({short})", f"op acc ({short})", "type acc (all)", "op acc (all)",
              "median LM calls", "median tokens", "LM calls total", "median replayed calls", "replayed calls total",
              "confirmed (true / false / none)", "seconds", "errors"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for method, r in results["methods"].items():
        overall, part = r["score"]["overall"], r.get(source) or {"n": 0, "type_acc": 0.0, "op_acc": 0.0}
        cells = [method, overall["n"], part["n"], f"{100 * part['type_acc']:.1f}",
                 f"{100 * part['op_acc']:.1f}", f"{100 * overall['type_acc']:.1f}", f"{100 * overall['op_acc']:.1f}",
                 r["median_lm_calls"], f"{r['median_tokens']:.0f}", r["total_lm_calls"], *_replay_cells(r),
                 r["seconds"], r["errors"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines + [TABLE_NOTE])


#: under the table: which calls each cost column counts
TABLE_NOTE = ("\nLM calls and tokens: the attributor's questions per case (the cost target). Replayed calls: the task "
              "model's calls while a method replayed the case (graphtrace's confirmation, counterfactual), apart. "
              "Confirmed: the share of upstream verdicts a replay confirmed (true / false / none: no replay decided).")


def _replay_cells(r: dict[str, Any]) -> list[Any]:
    """Median and total replayed calls and the confirmation cell; `-` for a method that replayed nothing (or a
    score saved before they were reported)."""
    confirmed = r.get("confirmed") or {}
    if not (r.get("total_replay_calls") or confirmed.get("true") or confirmed.get("false")):
        return ["-", "-", "-"]
    return [f"{r.get('median_replay_calls', 0):g}", r.get("total_replay_calls", 0),
            Confirmation.from_dict(confirmed).cell()]


def misses_text(results: dict[str, Any]) -> str:
    """Every miss on the human labels, per method: the label and its rationale, the verdict and its reason."""
    out = []
    for method, r in results["methods"].items():
        found = r.get("misses_human") or []
        if not found:
            continue
        out.append(f"### {method}: {len(found)} missed\n")
        for miss in found:
            label, verdict = miss["label"], miss["verdict"] or {}
            said = (f"said {verdict.get('error_type')} at {verdict.get('op_id') or '-'} ({verdict.get('op') or '-'}): "
                    f"{verdict.get('reason') or verdict.get('error') or ''}") if verdict else "gave no verdict"
            out.append(f"- {miss['case_id']}: label {label['error_type']} at {', '.join(label['ops']) or '-'} "
                       f"({label['rationale'] or 'no rationale'}); {said}")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lm", default="embedded", help="task model (runs the systems, replays)")
    parser.add_argument("--attributor-lm", default=None, help="attributor model (default: the task model)")
    parser.add_argument("--judge-lm", default=None,
                        help="judge model for the GoldError tests of lineage, graphtrace and counterfactual (an "
                             "answer in other words; with --judge-evidence also gold evidence that does not say the "
                             "gold answer); none by default: then no method says GoldError by them")
    parser.add_argument("--judge-evidence", action="store_true",
                        help="with --judge-lm: also ask the judge whether the gold evidence turns say the gold answer, "
                             "a GoldError when they do not (off by default: a small judge reads an answer the turns "
                             "imply as not said)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="the systems whose cases are built and scored (of a labelled split, those kept)")
    parser.add_argument("--methods", default=",".join(method_names()))
    parser.add_argument("--data", choices=("shared", "sample"), default="shared",
                        help="shared: LoCoMo + LongMemEval slices; sample: the packaged sample (for dry runs)")
    parser.add_argument("--locomo-sample", default="conv-26")
    parser.add_argument("--locomo-sessions", type=int, default=3, help="sessions 1..N of the LoCoMo conversation")
    parser.add_argument("--lme-samples", default=",".join(LME_SAMPLES))
    parser.add_argument("--per-kind", type=int, default=1, help="injected cases per error type, system, conversation")
    parser.add_argument("--natural", action="store_true", help="add the systems' own failures (lineage labels)")
    parser.add_argument("--embedder", default="minilm", help="embedder of the systems and of pseudo-evidence")
    parser.add_argument("--max-calls", type=int, default=8,
                        help="attributor LM calls per case at most (graphtrace; its replays on the task model are "
                             "not among them)")
    parser.add_argument("--no-confirm", action="store_true",
                        help="graphtrace without its confirmation by replay (the task model replays a verdict on an "
                             "upstream op by default)")
    parser.add_argument("--max-cases", type=int, default=None,
                        help="score at most N cases, spread over systems and error types (the LM methods cost minutes "
                             "per case on a small CPU)")
    parser.add_argument("--eval-only", action="store_true", help="score the bench already under --out")
    parser.add_argument("--no-gold-evidence", action="store_true",
                        help="hide the gold evidence ids from the methods (they use pseudo-evidence, as on data without "
                             "them); scores go to results-pseudo.json/.md, verdicts to each part's eval-pseudo/")
    parser.add_argument("--split", choices=("built", *LABELLED_SPLITS, *SPLIT_ALIASES), default="built",
                        help="built: build a bench on the slices and score it; dev: score the human-labelled split "
                             "attribution was developed on; test: score the held-out human-labelled split (report it "
                             "apart from dev, never tune on it); human: the old name of dev")
    parser.add_argument("--split-dir", type=Path, default=None,
                        help="the labelled split to score (a bench directory; default: the repository's split named by "
                             "--split)")
    parser.add_argument("--out", type=Path, default=Path("runs") / f"bench-attribution-{time.strftime('%Y%m%d-%H%M%S')}")
    args = parser.parse_args(argv)
    args.split = SPLIT_ALIASES.get(args.split, args.split)
    if args.judge_evidence and not args.judge_lm:
        parser.error("--judge-evidence asks the judge: name it with --judge-lm")

    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(method_names()))
    if unknown:
        parser.error(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(method_names())}")
    roles = ModelRoles(task=ModelSpec(model=args.lm), attributor=ModelSpec(model=args.attributor_lm or args.lm),
                       judge=ModelSpec(model=args.judge_lm) if args.judge_lm else None)
    models = Models.from_roles(roles)
    progress.watch(models.usage)
    if args.split in LABELLED_SPLITS:
        copy_split(args.split_dir or SPLITS_DIR / args.split, args.out / args.split)
    elif not args.eval_only:
        build(args, models)
    args.out.mkdir(parents=True, exist_ok=True)
    header = (f"task LM {args.lm}, attributor {args.attributor_lm or args.lm}"
              f"{f', judge {args.judge_lm}' if args.judge_lm else ''}"
              f"{' (with its gold-evidence test)' if args.judge_evidence else ''}"
              f"{', gold evidence hidden (pseudo-evidence)' if args.no_gold_evidence else ''}"
              f"{f', the human-labelled {args.split} split' if args.split in LABELLED_SPLITS else ''}")
    name = results_name(args)

    def save(results: dict[str, Any]) -> list[tuple[str, bool]]:
        results["models"] = {"task": args.lm, "attributor": args.attributor_lm or args.lm, "judge": args.judge_lm}
        results["judge_evidence"] = args.judge_evidence
        results["split"] = args.split
        checks = targets(results, args.split)
        results["targets"] = [{"target": line, "met": ok} for line, ok in checks]
        (args.out / f"{name}.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        missed = misses_text(results) if args.split in LABELLED_SPLITS else ""
        (args.out / f"{name}.md").write_text(
            f"MemTraceBench, {results['cases']} cases scored; {header}\n\n{table(results, args.split)}\n\n"
            + "\n".join(f"- {'met' if ok else 'missed'}: {line}" for line, ok in checks) + "\n"
            + (f"\n## Misses on the human labels\n\n{missed}" if missed else ""), encoding="utf-8")
        return checks

    results = evaluate(args, models, methods, save)
    checks = save(results)
    print(f"\nMemTraceBench ({results['cases']} cases scored; {header})\n")
    print(table(results, args.split))
    print()
    for line, ok in checks:
        print(f"{'met   ' if ok else 'missed'} {line}")
    return 0 if checks and all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(with_progress(main))
