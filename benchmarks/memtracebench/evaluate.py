"""Score attribution methods on MemTraceBench: error-type accuracy, operation accuracy (the verdict names one
of the label's acceptable ops; for a GoldError label, naming GoldError), both, per system and label source, a
confusion matrix of error types, and the cost per case: the attributor's questions (LM calls and tokens, what the
cost target is on) and beside them the task model's replayed calls (graphtrace's confirmation, counterfactual) with
how many upstream verdicts a replay confirmed (`costs.py`; never mixed into the attributor's calls). Every table is given per label source (injected,
lineage, human): lineage is exact on its own labels by construction and injected faults are not natural
failures, so only the human labels say how often a method agrees with a person. On them lineage's agreement
is reported as a reference (scored even when not asked for: it needs no LM).

Verdicts go to `<bench>/eval/<method>.jsonl` and the scores to `<bench>/eval/results.json`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.table import Table

from memtrace_opt.attribution import (
    ERROR_TYPES,
    GOLD,
    AnswerJudge,
    AttributionConfig,
    FailedCase,
    Verdict,
    attribute_cases,
)
from memtrace_opt.attribution.protocol import JUDGED_METHODS, REPLAY_METHODS
from memtrace_opt.attribution.runs import append_verdict, latest, read_verdicts, verdict_line
from memtrace_opt.benchmarks.memtracebench._types import BENCH_SCHEMA_VERSION, SOURCES, BenchCase
from memtrace_opt.benchmarks.memtracebench.build import CASES_FILE
from memtrace_opt.benchmarks.memtracebench.costs import CaseCosts
from memtrace_opt.errors import MemtraceError
from memtrace_opt.rundir import write_jsonl

__all__ = ["Score", "MethodScore", "load_bench", "score_verdicts", "eval_bench", "eval_dir", "bench_replay_provider",
           "replays", "score_tables", "confusion_table", "case_hits", "reference_agreement", "REFERENCE_METHOD", "HUMAN"]

HUMAN = "human"
#: scored on the human labels as a reference, whether asked for or not
REFERENCE_METHOD = "lineage"

log = logging.getLogger(__name__)


def load_bench(path: str | Path) -> tuple[Path, list[BenchCase]]:
    """(the directory, its cases) from a bench directory or its cases.jsonl. MemtraceError if absent."""
    path = Path(path)
    file = path / CASES_FILE if path.is_dir() else path
    if not file.is_file():
        raise MemtraceError(f"{path}: no MemTraceBench cases ({CASES_FILE})")
    rows = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return file.parent, [BenchCase.from_dict(row) for row in rows]


@dataclass(frozen=True)
class Score:
    """Accuracy over `n` cases."""

    n: int = 0
    type_hits: int = 0
    op_hits: int = 0
    both_hits: int = 0

    def add(self, type_hit: bool, op_hit: bool) -> Score:
        return Score(self.n + 1, self.type_hits + type_hit, self.op_hits + op_hit, self.both_hits + (type_hit and op_hit))

    def rate(self, hits: int) -> float:
        return hits / self.n if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "type_acc": round(self.rate(self.type_hits), 4), "op_acc": round(self.rate(self.op_hits), 4),
                "both_acc": round(self.rate(self.both_hits), 4)}


@dataclass(frozen=True)
class MethodScore:
    """A method's scores on a set of cases; `per_source` holds the same scores on each label source's cases.
    `reference` marks lineage scored only as the reference on human labels (not asked for). `cost` holds the
    attributor's mean calls, tokens and seconds per case; `costs` the medians and totals, the task model's replayed
    calls apart, and the upstream verdicts' confirmation."""

    method: str
    overall: Score
    by_system: dict[str, Score] = field(default_factory=dict)
    by_source: dict[str, Score] = field(default_factory=dict)
    by_type: dict[str, Score] = field(default_factory=dict)
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    per_source: dict[str, MethodScore] = field(default_factory=dict)
    reference: bool = False
    costs: CaseCosts = field(default_factory=CaseCosts)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "method": self.method,
            "overall": self.overall.to_dict(),
            "by_system": {k: v.to_dict() for k, v in sorted(self.by_system.items())},
            "by_source": {k: v.to_dict() for k, v in sorted(self.by_source.items())},
            "by_type": {k: v.to_dict() for k, v in sorted(self.by_type.items())},
            "confusion": self.confusion,
            "cost_per_case": self.cost,
            "costs": self.costs.to_dict(),
            "errors": self.errors,
        }
        if self.per_source:
            data["per_source"] = {k: v.to_dict() for k, v in sorted(self.per_source.items())}
        if self.reference:
            data["reference"] = True
        return data


def case_hits(case: BenchCase, verdict: Verdict) -> tuple[bool, bool]:
    """(error type right, op right): the op is right when the verdict names any acceptable op; for a GoldError
    label (no op at fault) when the verdict says GoldError."""
    type_hit = verdict.error_type == case.label.error_type
    if case.label.error_type == GOLD:
        return type_hit, type_hit
    return type_hit, case.label.accepts(verdict.op_id)


def _sources(cases: Sequence[BenchCase]) -> list[str]:
    """The label sources among `cases`, known ones first in SOURCES order."""
    found = {c.label.source for c in cases}
    return [s for s in SOURCES if s in found] + sorted(found - set(SOURCES))


def score_verdicts(method: str, cases: Sequence[BenchCase], verdicts: Sequence[Verdict], *,
                   per_source: bool = True) -> MethodScore:
    """Score verdicts (matched to cases by case_id) against the cases' labels, overall and per label source."""
    by_id = {v.case_id: v for v in verdicts}
    split = {source: score_verdicts(method, [c for c in cases if c.label.source == source], verdicts,
                                    per_source=False) for source in _sources(cases)} if per_source else {}
    overall = Score()
    by_system: dict[str, Score] = {}
    by_source: dict[str, Score] = {}
    by_type: dict[str, Score] = {}
    confusion: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    errors = 0
    for case in cases:
        verdict = by_id.get(case.case_id) or Verdict.failed(case.case_id, method, "no verdict")
        type_hit, op_hit = case_hits(case, verdict)
        overall = overall.add(type_hit, op_hit)
        by_system[case.system] = by_system.get(case.system, Score()).add(type_hit, op_hit)
        by_source[case.label.source] = by_source.get(case.label.source, Score()).add(type_hit, op_hit)
        by_type[case.label.error_type] = by_type.get(case.label.error_type, Score()).add(type_hit, op_hit)
        predicted = verdict.error_type or "error"
        confusion.setdefault(case.label.error_type, Counter())[predicted] += 1
        errors += verdict.error is not None
        totals["lm_calls"] += verdict.cost.lm_calls
        totals["prompt_tokens"] += verdict.cost.prompt_tokens
        totals["completion_tokens"] += verdict.cost.completion_tokens
        totals["seconds"] += verdict.cost.seconds  # type: ignore[assignment]
    n = max(1, len(cases))
    cost = {key: round(value / n, 3) for key, value in totals.items()}
    costs = CaseCosts.of([by_id[c.case_id] for c in cases if c.case_id in by_id])
    return MethodScore(method, overall, by_system, by_source, by_type,
                       {k: dict(v) for k, v in confusion.items()}, cost, errors, split, costs=costs)


def bench_replay_provider(root: str | Path, cases: Sequence[BenchCase], task_lm: Any = None
                          ) -> Callable[[FailedCase], Any]:
    """A replay provider for the counterfactual method on a bench: each case's program rebuilt from its replay
    request (system and its settings), its conversation reloaded from the recorded data spec and slice, its
    graph as the record, and for an injected case the injected fault forced again (the record was made with
    it). A case imported from a run (`...:human:RUN`) replays with that run's request, kept in the manifest's
    `imports`, so one split can mix systems and datasets; any other case with the manifest's `request`.
    Programs and conversations load once, on first use; None for a case whose conversation cannot be found
    (the method then keeps graphtrace's verdict, unconfirmed)."""
    from memtrace_opt.attribution.counterfactual import ReplayContext
    from memtrace_opt.benchmarks.memtracebench.human import human_run

    root = Path(root)
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise MemtraceError(f"{manifest_path}: cannot read the bench manifest ({error}); cannot replay") from error
    default = manifest.get("request") or {}
    by_run = {str(i.get("run")): i["request"] for i in manifest.get("imports") or [] if i.get("request")}
    by_id = {c.case_id: c for c in cases}
    programs: dict[str, Any] = {}
    conversations: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()

    def provide(case: FailedCase) -> Any:
        from memtrace_opt.attribution.runs import recorded_conversations
        from memtrace_opt.programs import make_program

        bench_case = by_id.get(case.case_id)
        system = case.system or (bench_case.system if bench_case else "")
        if not system:
            return None
        run = human_run(case.case_id)
        request = by_run.get(run, default) if run is not None else default
        data = str(request.get("data") or "sample")
        settings = dict((request.get("settings") or {}).get(system) or {})
        data_key = json.dumps([data, request.get("slice")], sort_keys=True)
        program_key = json.dumps([system, settings], sort_keys=True, default=str)
        with lock:
            if data_key not in conversations:
                conversations[data_key] = dict(recorded_conversations(data, request.get("slice")))
            if program_key not in programs:
                programs[program_key] = make_program(system, settings)
        conversation = conversations[data_key].get(case.sample_id or "")
        if conversation is None:
            return None
        injection = bench_case.injection if bench_case is not None else None
        forced = {injection.seq: injection.forced} if injection is not None else {}
        return ReplayContext(program=programs[program_key], conversation=conversation, lm=task_lm, forced=forced)

    return provide


def eval_bench(
    bench: str | Path,
    methods: Iterable[str],
    *,
    lm: Any = None,
    config: AttributionConfig | None = None,
    limit: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    num_threads: int = 1,
    task_lm: Any = None,
    case_ids: Iterable[str] | None = None,
    fresh: bool = False,
    gold_evidence: bool = True,
    reference: bool = False,
    judge: AnswerJudge | None = None,
) -> list[MethodScore]:
    """Run each method on the bench's cases and score it; writes `eval/<method>.jsonl` and `eval/results.json`.
    `lm` is the attributor model; `task_lm` the model the systems run on when `counterfactual` replays, and
    graphtrace to confirm its verdicts (`config.confirm`; see `bench_replay_provider`; None = the LM in context). `case_ids` keeps only those cases, `limit` the
    first N.

    Resumable: each verdict is appended to `eval/<method>.jsonl` as its case ends, and a case that already has
    a verdict (without `error`) from the method is not attributed again; `fresh` starts the method over.
    Verdicts on cases outside `case_ids` / `limit` stay in the file. Building a bench into the directory again
    removes `eval/`, so verdicts never outlive their cases.

    `reference`: with human-labelled cases among them, lineage is scored on those too (a `reference` score at the
    end of the list, unless asked for as a method). Either way its agreement with people is in `results.json`
    as `lineage_agreement_with_human` when lineage was scored on human labels.

    `judge` (the judge role, an `AnswerJudge`) goes to the methods that take one, for their GoldError tests.

    `gold_evidence=False` hides the gold evidence ids from the methods, as on a user's own data without them:
    they work from pseudo-evidence (the question and gold answer against the turns). Those verdicts and scores
    go to `eval-pseudo/` in place of `eval/`, so the two settings never mix."""
    root, cases = load_bench(bench)
    every = cases
    if case_ids is not None:
        keep = set(case_ids)
        cases = [c for c in cases if c.case_id in keep]
    if limit is not None:
        cases = cases[:limit]
    out = root / eval_dir(gold_evidence)
    out.mkdir(parents=True, exist_ok=True)
    scores = []

    def run(method: str, subset: list[BenchCase]) -> list[Verdict]:
        path = out / f"{method}.jsonl"
        if fresh:
            path.unlink(missing_ok=True)
        wanted = {c.case_id for c in subset}
        earlier = latest(read_verdicts(path), method)
        done = {cid: v for cid, v in earlier.items() if v.error is None and cid in wanted}
        if done:
            log.info("%s: %d of %d cases already attributed (kept; --fresh to redo them)", method, len(done), len(subset))
        todo = [c for c in subset if c.case_id not in done]

        def tick(count: int, total: int, verdict: Verdict, before: int = len(done)) -> None:
            append_verdict(path, verdict)  # one line per case as it ends: a stopped eval keeps its verdicts
            if progress is not None:
                progress(method, before + count, before + total)

        options: dict[str, Any] = {}
        if replays(method, config):
            options["replay_provider"] = bench_replay_provider(root, subset, task_lm)
        if judge is not None and method in JUDGED_METHODS:
            options["judge"] = judge
        new = attribute_cases([_shown(c.failed_case(root), gold_evidence) for c in todo], method, lm=lm, config=config,
                              progress=tick, num_threads=num_threads, **options)
        found = {**done, **{v.case_id: v for v in new}}
        # one per case in bench order, in place of the appended lines; verdicts on cases outside this subset stay
        kept = {**earlier, **found}
        write_jsonl(path, (verdict_line(kept[c.case_id]) for c in every if c.case_id in kept))
        return [found[c.case_id] for c in subset if c.case_id in found]

    methods = list(methods)
    for method in methods:
        scores.append(score_verdicts(method, cases, run(method, cases)))
    human = [c for c in cases if c.label.source == HUMAN]
    if reference and human and REFERENCE_METHOD not in methods:
        lineage = score_verdicts(REFERENCE_METHOD, human, run(REFERENCE_METHOD, human))
        scores.append(replace(lineage, reference=True))
    results = {"schema_version": BENCH_SCHEMA_VERSION, "cases": len(cases), "methods": [s.to_dict() for s in scores]}
    agreement = reference_agreement(scores)
    if agreement is not None:
        results["lineage_agreement_with_human"] = agreement.to_dict()
    (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return scores


def replays(method: str, config: AttributionConfig | None = None) -> bool:
    """Whether `method` replays the cases (and so needs the task model): counterfactual always; graphtrace to confirm
    its verdicts unless `config.confirm` is off."""
    return method == "counterfactual" or (method in REPLAY_METHODS and (config or AttributionConfig()).confirm)


def reference_agreement(scores: Sequence[MethodScore]) -> Score | None:
    """Lineage's agreement with the human labels (its scores on the human-labelled cases), or None without them."""
    for score in scores:
        if score.method == REFERENCE_METHOD and HUMAN in score.per_source:
            return score.per_source[HUMAN].overall
    return None


def eval_dir(gold_evidence: bool = True) -> str:
    """Where a bench's verdicts go: `eval` with the gold evidence shown to the methods, `eval-pseudo` without."""
    return "eval" if gold_evidence else "eval-pseudo"


def _shown(case: FailedCase, gold_evidence: bool) -> FailedCase:
    """The case as the methods see it: without gold evidence ids (in the case and its question) unless shown."""
    if gold_evidence:
        return case
    question = {**case.question, "evidence": []} if isinstance(case.question, dict) else case.question
    return replace(case, evidence=(), question=question)


def _pct(score: Score, hits: int) -> str:
    return f"{score.rate(hits):.0%}" if score.n else "-"


_SOURCE_NOTES = {
    "injected": "injected faults (the truth known)",
    "lineage": "natural failures labelled by lineage (silver: lineage is exact on them by construction)",
    "human": "labelled by a person",
}


#: the accuracy table's columns: the attributor's mean calls and tokens per case, then the task model's replayed
#: calls (median / total per case) and the upstream verdicts confirmed (share, and true / false / none)
ACCURACY_COLUMNS = ("method", "cases", "type acc", "op acc", "both", "LM calls", "tokens", "replayed calls",
                    "confirmed", "seconds", "errors")


def _accuracy_table(title: str, rows: Sequence[tuple[str, MethodScore]]) -> Table:
    table = Table(title=title, caption="LM calls, tokens: the attributor's, mean per case; replayed calls: the task "
                                       "model's, median / total; confirmed: upstream verdicts, share (true / false / none)")
    for column in ACCURACY_COLUMNS:
        table.add_column(column, justify="left" if column == "method" else "right")
    for name, s in rows:
        tokens = s.cost.get("prompt_tokens", 0) + s.cost.get("completion_tokens", 0)
        replayed = s.costs.replayed
        table.add_row(name, str(s.overall.n), _pct(s.overall, s.overall.type_hits), _pct(s.overall, s.overall.op_hits),
                      _pct(s.overall, s.overall.both_hits), f"{s.cost.get('lm_calls', 0):.1f}", f"{tokens:.0f}",
                      f"{s.costs.median_replay_calls:g} / {s.costs.total_replay_calls}" if replayed else "-",
                      s.costs.confirmation.cell() if replayed else "-",
                      f"{s.cost.get('seconds', 0):.2f}", str(s.errors))
    return table


def _system_table(title: str, rows: Sequence[tuple[str, MethodScore]]) -> Table:
    systems = sorted({k for _, s in rows for k in s.by_system})
    table = Table(title=title)
    table.add_column("method")
    for system in systems:
        table.add_column(system, justify="right")
    for name, s in rows:
        cells = [f"{_pct(x, x.type_hits)} / {_pct(x, x.op_hits)} (n={x.n})" if (x := s.by_system.get(system)) else "-"
                 for system in systems]
        table.add_row(name, *cells)
    return table


def score_tables(scores: Sequence[MethodScore]) -> list[Table]:
    """Accuracy and cost per method, and accuracy per method and system: over all cases, then per label source.
    On the human labels, lineage scored as the reference is the last row, `lineage (reference)`."""
    asked = [s for s in scores if not s.reference]
    tables = [_accuracy_table("MemTraceBench: attribution accuracy (all cases)", [(s.method, s) for s in asked]),
              _system_table("type acc / op acc by system (all cases)", [(s.method, s) for s in asked])]
    sources = list(dict.fromkeys(source for s in asked for source in s.per_source))
    if len(sources) < 2 and not any(s.reference for s in scores):
        return tables  # one source: its tables are the ones above
    for source in sources:
        rows = [(s.method, s.per_source[source]) for s in asked if source in s.per_source]
        rows += [(f"{s.method} (reference)", s.per_source[source]) for s in scores
                 if s.reference and source in s.per_source]
        note = _SOURCE_NOTES.get(source, source)
        tables.append(_accuracy_table(f"source {source}: {note}", rows))
        tables.append(_system_table(f"type acc / op acc by system (source {source})", rows))
    return tables


def confusion_table(score: MethodScore, source: str | None = None) -> Table:
    """Rows: labelled error type; columns: predicted error type. `source`: on that label source's cases only."""
    if source is not None:
        score = score.per_source.get(source) or MethodScore(score.method, Score())
    predicted = [t for t in (*ERROR_TYPES, "error") if any(t in row for row in score.confusion.values())]
    where = f", source {source}" if source is not None else ""
    table = Table(title=f"confusion ({score.method}{where}): label (rows) x prediction (columns)")
    table.add_column("label")
    for name in predicted:
        table.add_column(name.replace("Error", ""), justify="right")
    for label in [t for t in ERROR_TYPES if t in score.confusion]:
        row = score.confusion[label]
        table.add_row(label, *[str(row.get(name, 0)) for name in predicted])
    return table
