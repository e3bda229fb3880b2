"""Build MemTraceBench: labelled failures of the memory systems, from three sources.

- injected: a question a system answered right, one operation's outputs perturbed by a fault of a known type
  (`inject.py`), the conversation replayed with them forced; kept when the answer turns wrong. The label is
  the perturbed operation.
- lineage: the system's own failures, labelled by the lineage rules (a silver label).
- human: LoCoMo questions whose answer key the community corrected (PR #28): the prediction matches the
  corrected answer but is scored wrong against the original one -> GoldError.

Layout of `out/`: `cases.jsonl` (one bench case per line, docs/design.md format), `graphs/<system>/<sample>/*.json`
(the evolution graph each case refers to), `hf/` (the same cases as a Hugging Face dataset, `save_to_disk`),
`manifest.json` (schema_version, request, counts).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from memtrace_opt.attribution import RESPONSE, AttributionConfig, FailedCase, Flow, GraphView, get_attributor
from memtrace_opt.attribution.lineage import case_flow
from memtrace_opt.benchmarks.memtracebench._types import BENCH_SCHEMA_VERSION, BenchCase, Injection, Label
from memtrace_opt.benchmarks.memtracebench.inject import INJECTABLE, Plan, plan_injections

__all__ = ["BuildRequest", "BuildSummary", "build_bench", "default_pr28_path", "load_pr28", "write_cases", "CASES_FILE"]

log = logging.getLogger(__name__)

CASES_FILE = "cases.jsonl"
Progress = Callable[[str], None]


def default_pr28_path() -> Path:
    """`../shared/data/locomo/locomo10_pr28_qa_changes.jsonl` beside the repository root."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo10_pr28_qa_changes.jsonl"


@dataclass(frozen=True)
class BuildRequest:
    """`per_kind` injected cases per error type, per system and conversation; `settings` program settings by
    system; `embedder` for the information-flow analysis (pseudo-evidence)."""

    systems: tuple[str, ...]
    out: Path
    data: str = "sample"
    data_slice: Any = None
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    kinds: tuple[str, ...] = INJECTABLE
    per_kind: int = 2
    natural: bool = True
    gold: bool = True
    seed: int = 0
    embedder: str = "minilm"
    pr28_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"systems": list(self.systems), "data": self.data, "kinds": list(self.kinds),
                "per_kind": self.per_kind, "natural": self.natural, "gold": self.gold, "seed": self.seed,
                "embedder": self.embedder, "settings": {k: dict(v) for k, v in self.settings.items()},
                "slice": self.data_slice.to_dict() if self.data_slice is not None else None}


@dataclass(frozen=True)
class BuildSummary:
    out: Path
    cases: int
    counts: dict[str, dict[str, int]]  # system -> "source/error_type" -> cases


def load_pr28(path: Path | None) -> dict[str, dict[str, Any]]:
    """question_id (`{sample_id}:q{qa_index}`) -> the PR #28 change; {} when the file is absent."""
    path = path or default_pr28_path()
    if not path.is_file():
        log.warning("no answer-key corrections at %s: no GoldError cases", path)
        return {}
    changes: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            changes[f"{row['sample_id']}:q{row['qa_index']}"] = row
    return changes


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _correct(question: Any, answer: str) -> bool:
    from memtrace_opt.metrics.score import score_answer

    return score_answer(question, answer).correct_by_rule


class _Builder:
    def __init__(self, request: BuildRequest, task_lm: Any, progress: Progress | None) -> None:
        self.request = request
        self.task_lm = task_lm
        self.progress = progress or (lambda message: None)
        self.config = AttributionConfig(embedder=request.embedder)
        self.cases: list[BenchCase] = []
        self.pr28 = load_pr28(request.pr28_path) if request.gold else {}

    def save(self, graph: Any, system: str, sample_id: str, name: str) -> str:
        from memtrace_opt.tracing import save_graph

        relative = Path("graphs") / _safe(system) / _safe(sample_id) / f"{name}.json"
        save_graph(graph, self.request.out / relative)
        return relative.as_posix()

    def case(self, system: str, dataset: str, conversation: Any, question: Any, prediction: str, graph: str,
             label: Label, injection: Injection | None = None, gold: str | None = None) -> BenchCase:
        suffix = f"{label.source}:{label.error_type}" + (f":{injection.seq}" if injection else "")
        return BenchCase(
            case_id=f"{system}:{question.question_id}:{suffix}", system=system, dataset=dataset,
            sample_id=conversation.sample_id, question_id=question.question_id, question=question.question,
            gold=gold if gold is not None else question.answer, prediction=prediction,
            evidence=tuple(question.evidence), graph=graph, label=label, injection=injection,
            category=question.category, abstention=question.abstention,
        )

    def run(self, system: str, dataset: Any) -> None:
        from memtrace_opt.programs import make_program
        from memtrace_opt.tracing import trace_conversation

        for conversation in dataset.conversations:
            program = make_program(system, dict(self.request.settings.get(system, {})))
            self.progress(f"{system}: running {conversation.sample_id}")
            with dspy.context(lm=self.task_lm):
                base = trace_conversation(program, conversation, list(conversation.questions))
            graph = base.graph()
            base_path = self.save(graph, system, conversation.sample_id, "base")
            correct = [q for q in conversation.questions if _correct(q, base.answers.get(q.question_id, ""))]
            failed = [q for q in conversation.questions if q not in correct]
            self.inject(system, dataset.name, program, conversation, base, graph, correct)
            if self.request.natural:
                self.natural(system, dataset.name, conversation, base, graph, base_path, failed)
            if self.pr28:
                self.gold(system, dataset.name, conversation, base, base_path)

    def inject(self, system: str, dataset: str, program: Any, conversation: Any, base: Any, graph: Any,
               targets: Sequence[Any]) -> None:
        from memtrace_opt.tracing import replay

        view = GraphView(graph)
        order = list(targets)
        random.Random(f"{self.request.seed}:{system}:{conversation.sample_id}").shuffle(order)
        questions = list(conversation.questions)
        for kind in self.request.kinds:
            made = tried = 0
            for question in order:
                if made >= self.request.per_kind or tried >= 4 * self.request.per_kind + 4:
                    break
                upto = questions[: questions.index(question) + 1]  # same read-path call order as recorded
                if question.abstention and kind != RESPONSE:
                    continue  # losing information cannot break an answer that should abstain
                for plan in self._plans(view, question, base, kind)[:2]:
                    tried += 1
                    with dspy.context(lm=self.task_lm):
                        result = replay(program, conversation, upto, base.events, forced={plan.seq: plan.forced})
                    answer = result.answers.get(question.question_id, "")
                    replayed = GraphView(result.graph)
                    op_id = _same_op(replayed, plan)
                    if not _correct(question, answer) and op_id is not None and self._decisive(replayed, question, answer, plan):
                        break
                else:
                    continue
                made += 1
                path = self.save(result.graph, system, conversation.sample_id, f"inj-{kind}-{plan.seq}-{made}")
                injection = Injection(op_id, plan.op, plan.seq, plan.error_type, plan.how, plan.forced)
                label = Label(plan.error_type, op_id, plan.op, "injected")
                self.cases.append(self.case(system, dataset, conversation, question, answer, path, label, injection))
            self.progress(f"{system}: {conversation.sample_id}: {made} injected {kind}")

    def _flow(self, view: GraphView, question: Any, prediction: str) -> Flow | None:
        case = FailedCase(question.question_id, question, question.answer, prediction, tuple(question.evidence))
        try:
            return case_flow(view, case, self.config)
        except Exception as error:  # noqa: BLE001 - a question the graph cannot follow gets no injection
            log.info("no flow for %s: %s", question.question_id, error)
            return None

    def _plans(self, view: GraphView, question: Any, base: Any, kind: str) -> list[Plan]:
        flow = self._flow(view, question, base.answers.get(question.question_id, ""))
        if flow is None:
            return []
        return plan_injections(view, flow, [kind], abstention=question.abstention,
                               distractor=question.adversarial_answer)

    def _decisive(self, replayed: GraphView, question: Any, answer: str, plan: Plan) -> bool:
        """Whether the injected fault alone explains the failure: a fault upstream of the answer op is decisive
        only if the needed information no longer reaches the answer op, and no earlier op lost it already. Had
        it still arrived by another path (an episode that kept a fact its event log lost), an ideal answerer
        would have been right; had an earlier op lost it too (an episode that never held the fact its event log
        carried; a decision that overwrote one unit holding it before the injected one deleted the other), that
        op is the earliest decisive fault. Either way the case has no single known root cause."""
        if plan.error_type == RESPONSE:
            return True
        flow = self._flow(replayed, question, answer)
        if flow is None:
            return True
        if flow.reached_answer:
            log.info("%s at %s: the information still reaches the answer op; case not kept", plan.error_type, plan.op)
            return False
        if not flow.formed:
            earlier = [op for op in (*flow.losses, *flow.drops) if replayed.seq(op) < plan.seq]
        else:  # memory held it once: an earlier decision that overwrote or deleted one of its holders
            earlier = [t.decider for t in flow.transitions if replayed.seq(t.decider) < plan.seq] if not flow.live else []
        if earlier:
            log.info("%s at %s: %s lost the information before it; case not kept", plan.error_type, plan.op,
                     replayed.op_name(earlier[0]))
            return False
        return True

    def natural(self, system: str, dataset: str, conversation: Any, base: Any, graph: Any, path: str,
                failed: Sequence[Any]) -> None:
        lineage = get_attributor("lineage", self.config)
        for question in failed:
            prediction = base.answers.get(question.question_id, "")
            case = FailedCase(question.question_id, question, question.answer, prediction, tuple(question.evidence))
            verdict = lineage.attribute(case, graph)
            if verdict.error is None and verdict.error_type:
                label = Label(verdict.error_type, verdict.op_id, verdict.op, "lineage")
                self.cases.append(self.case(system, dataset, conversation, question, prediction, path, label))

    def gold(self, system: str, dataset: str, conversation: Any, base: Any, path: str) -> None:
        import dataclasses

        for question in conversation.questions:
            change = self.pr28.get(question.question_id)
            prediction = base.answers.get(question.question_id, "")
            if change is None or question.abstention:
                continue
            corrected = dataclasses.replace(question, answer=str(change["pr28"]["answer"]))
            upstream = dataclasses.replace(question, answer=str(change["upstream"]["answer"]))
            if not _correct(upstream, prediction) and _correct(corrected, prediction):
                label = Label("GoldError", None, None, "human",
                              rationale=f"the answer key was corrected: {upstream.answer!r} -> {corrected.answer!r}, "
                                        f"and the prediction {prediction!r} matches the correction",
                              by="LoCoMo PR #28")
                self.cases.append(self.case(system, dataset, conversation, upstream, prediction, path, label,
                                            gold=upstream.answer))


def _same_op(view: GraphView, plan: Plan) -> str | None:
    """The perturbed op in the replayed graph: `op:{seq}` if it is the same operation, else the nearest op of
    that name."""
    node = f"op:{plan.seq}"
    if view.is_op(node) and view.op_name(node) == plan.op:
        return node
    same = [op for op in view.ops if view.op_name(op) == plan.op]
    return min(same, key=lambda op: abs(view.seq(op) - plan.seq)) if same else None


def write_cases(out: Path, cases: Sequence[BenchCase]) -> dict[str, dict[str, int]]:
    """Writes `out/cases.jsonl` and `out/hf/`; returns the counts by system and "source/error_type"."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(c.to_dict(), sort_keys=True, ensure_ascii=False) for c in cases]
    (out / CASES_FILE).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    rows = [{**c.to_dict(), "evidence": list(c.evidence), "label": json.dumps(c.label.to_dict(), sort_keys=True),
             "injection": json.dumps(c.injection.to_dict(), sort_keys=True) if c.injection else "",
             "label_error_type": c.label.error_type, "label_source": c.label.source} for c in cases]
    _save_hf(out / "hf", rows)
    counts: dict[str, Counter[str]] = {}
    for c in cases:
        counts.setdefault(c.system, Counter())[f"{c.label.source}/{c.label.error_type}"] += 1
    return {system: dict(sorted(counter.items())) for system, counter in sorted(counts.items())}


def _write(out: Path, cases: Sequence[BenchCase], request: BuildRequest, seconds: float) -> dict[str, dict[str, int]]:
    out.mkdir(parents=True, exist_ok=True)
    for verdicts in ("eval", "eval-pseudo"):  # verdicts and scores of the cases being replaced
        shutil.rmtree(out / verdicts, ignore_errors=True)
    plain = write_cases(out, cases)
    manifest = {"schema_version": BENCH_SCHEMA_VERSION, "kind": "memtracebench", "request": request.to_dict(),
                "cases": len(cases), "counts": plain, "seconds": round(seconds, 2)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return plain


_STRING_COLUMNS = ("case_id", "system", "dataset", "sample_id", "question_id", "question", "gold", "prediction",
                   "graph", "label", "injection", "category", "label_error_type", "label_source")


def _save_hf(path: Path, rows: list[dict[str, Any]]) -> None:
    """The cases as a Hugging Face dataset; `label` and `injection` as JSON text (their shapes vary).

    Skipped, with a log line, where `datasets` is not installed (the `hf` extra): cases.jsonl holds the same rows.
    """
    try:
        import datasets
    except ImportError:
        log.info("not writing %s: the Hugging Face export needs pip install 'memtrace-opt[hf]'", path)
        return

    features = datasets.Features({
        **{name: datasets.Value("string") for name in _STRING_COLUMNS},
        "evidence": datasets.Sequence(datasets.Value("string")),
        "abstention": datasets.Value("bool"),
        "schema_version": datasets.Value("int32"),
    })
    columns = {name: [row[name] for row in rows] for name in features}
    quiet = datasets.is_progress_bar_enabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        datasets.Dataset.from_dict(columns, features=features).save_to_disk(str(path))
    finally:
        if quiet:
            datasets.enable_progress_bars()


def build_bench(request: BuildRequest, *, task_lm: Any = None, progress: Progress | None = None) -> BuildSummary:
    """Build the benchmark into `request.out` (see the module docstring). `task_lm` runs the systems."""
    from memtrace_opt.data import load_data

    started = time.time()
    dataset = load_data(request.data, request.data_slice)
    builder = _Builder(request, task_lm, progress)
    for system in request.systems:
        builder.run(system, dataset)
    counts = _write(request.out, builder.cases, request, time.time() - started)
    return BuildSummary(request.out, len(builder.cases), counts)
