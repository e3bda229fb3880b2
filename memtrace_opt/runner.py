"""`memtrace run`: run a memory system over a dataset slice, traced, scored, into a run directory.

The plain function `run_system(RunRequest)` is what the CLI and the tests call. Each conversation gets a fresh
`MemoryState` and its own trace. Trace events (answers included) are flushed to events.jsonl as they happen; a
conversation's graph and scored cases are written when it finishes, so a crash keeps every event and every
finished conversation.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dspy
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memtrace_opt.config_schema import validate_program_settings
from memtrace_opt.data import Conversation, Dataset, DataSlice, Question, load_data
from memtrace_opt.errors import ConfigError, DatasetError, Interrupted, MemtraceError
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.metrics import CategoryTable, ScoreRow, category_table, score_answer
from memtrace_opt.programs import MemoryProgram, make_program
from memtrace_opt.redact import redact
from memtrace_opt.rundir import SCHEMA_VERSION, CaseRecord, RunDir, add_usage, versions

__all__ = ["RunRequest", "RunSummary", "run_system", "score_case", "load_program_state"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRequest:
    """Everything one `memtrace run` needs. `data` is "PATH[:SAMPLE_ID]" or locomo / longmemeval / sample."""

    system: str
    data: str
    out: Path
    roles: ModelRoles = field(default_factory=ModelRoles)
    data_slice: DataSlice = field(default_factory=DataSlice)
    program_settings: dict[str, Any] = field(default_factory=dict)
    program_path: Path | None = None
    judge: bool = True
    threads: int = 1
    seed: int = 0
    resume: bool = False  # continue the killed run in `out`: keep its finished conversations, rerun the rest
    max_failures: int = 5  # stop the run (status "failed") after this many LM calls fail in a row; 0: never
    check_models: bool = True  # one test call to each needed role's model first (when `models` is not given)


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    table: CategoryTable
    questions: int
    correct: int
    op_failures: int
    seconds: float
    usage: dict[str, dict[str, Any]]
    status: str = "complete"  # "complete" or "failed" (`error` says why; what finished is written)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.status != "complete"


def load_program_state(program: MemoryProgram, path: Path) -> None:
    """Load a saved/compiled program state (program.json) into `program`."""
    from memtrace_opt.errors import ConfigError

    if not path.is_file():
        raise ConfigError(f"{path}: no such program file")
    try:
        program.load(str(path))
    except Exception as error:  # noqa: BLE001 - a wrong or corrupt file is a user error
        raise ConfigError(f"{path}: cannot load program state: {error}") from error


def score_case(
    question: Question, prediction: str, *, judge: Any | None, judge_lm: dspy.LM | None
) -> tuple[dict[str, float | None], bool]:
    """Scores (f1, bleu1, judge) and whether the answer counts as correct.

    Abstention/adversarial questions are scored as the datasets define them (the rule); otherwise the judge's
    verdict decides when there is one, else the token rule (`score_answer`'s correct_by_rule).
    """
    lexical = score_answer(question, prediction)
    judged: bool | None = None
    if judge is not None and not question.abstention:
        with dspy.context(callbacks=[]):  # the judge is not part of the traced program
            judged = judge.judge_question(question, prediction, lm=judge_lm).correct
    correct = lexical.correct_by_rule if judged is None else judged
    scores: dict[str, float | None] = {
        "f1": round(lexical.f1, 4),
        "bleu1": round(lexical.bleu1, 4),
        "judge": None if judged is None else float(judged),
    }
    return scores, bool(correct)


class _Progress:
    """Rich progress: sessions memorized and questions answered, with elapsed time and LM calls."""

    def __init__(self, dataset: Dataset, models: Models, console: Console | None, enabled: bool) -> None:
        self.models = models
        self._lock = threading.Lock()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[lm]}"),
            console=console,
            disable=not enabled,
            transient=False,
        )
        sessions = sum(len(c.sessions) for c in dataset.conversations)
        questions = sum(len(c.questions) for c in dataset.conversations)
        self.sessions = self.progress.add_task("sessions memorized", total=sessions, lm="")
        self.questions = self.progress.add_task("questions answered", total=questions, lm="")

    def _lm(self) -> str:
        calls = sum(u.calls for u in self.models.usage.snapshot().values())
        return f"{calls} LM calls"

    def skip(self, conversation: Conversation) -> None:
        """Count a conversation a resumed run keeps as done."""
        with self._lock:
            self.progress.update(self.sessions, advance=len(conversation.sessions))
            self.progress.update(self.questions, advance=len(conversation.questions))

    def session_done(self, *_: Any) -> None:
        with self._lock:
            self.progress.update(self.sessions, advance=1, lm=self._lm())

    def question_done(self, *_: Any) -> None:
        with self._lock:
            self.progress.update(self.questions, advance=1, lm=self._lm())

    @contextlib.contextmanager
    def running(self) -> Iterator[_Progress]:
        with self.progress:
            yield self


class _Stopped(Exception):  # noqa: N818 - a control signal between the callbacks and the runner
    """Raised in a conversation's callbacks once the run is stopping (Ctrl-C, or calls failing in a row)."""


def _run_config(request: RunRequest, program: MemoryProgram, dataset: Dataset) -> dict[str, Any]:
    return {
        "system": request.system,
        "program": program.config.to_dict(),
        "program_path": str(request.program_path) if request.program_path else None,
        "dataset": dataset.name,
        "data": {"spec": request.data, "path": str(dataset.path), "slice": request.data_slice.to_dict()},
        "models": request.roles.to_dict(),
        "judge": request.judge,
        "threads": request.threads,
        "seed": request.seed,
    }


def _check_resumable(run: RunDir, config: dict[str, Any]) -> None:
    """A resume must run what the killed run ran: every setting but `threads` as it was."""
    stored = _plain(run.read_config())
    fresh = _plain(redact({"schema_version": SCHEMA_VERSION, **config}))
    first = ("system", "data", "dataset", "models", "program", "program_path", "judge", "seed")
    for key in sorted(set(stored) | set(fresh), key=lambda k: (first.index(k) if k in first else len(first), k)):
        if key in ("threads", "schema_version"):
            continue
        if stored.get(key) != fresh.get(key):
            raise ConfigError(f"--resume: {run.root} was run with {key} = {stored.get(key)!r}, this command "
                              f"gives {fresh.get(key)!r}; resume with the same settings or choose another --out")


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _finished(run: RunDir, dataset: Dataset) -> dict[str, list[CaseRecord]]:
    """The conversations of `dataset` a killed run finished (graph written, every question's case recorded),
    with their cases; the others are discarded (events, graph, cases) so they run again."""
    cases: dict[str, list[CaseRecord]] = {}
    for case in run.read_cases():
        cases.setdefault(case.sample_id, []).append(case)
    done: dict[str, list[CaseRecord]] = {}
    for conversation in dataset.conversations:
        kept = cases.get(conversation.sample_id, [])
        answered = {c.question_id for c in kept}
        if run.graph_path(conversation.sample_id).exists() and answered >= {
                q.question_id for q in conversation.questions}:
            done[conversation.sample_id] = kept
        else:
            run.discard_conversation(conversation.sample_id)
    return done


def _prior_usage(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    usage = manifest.get("usage")
    return usage if isinstance(usage, dict) else {}


def run_system(
    request: RunRequest,
    *,
    console: Console | None = None,
    progress: bool = True,
    models: Models | None = None,
    dataset: Dataset | None = None,
) -> RunSummary:
    """Run `request.system` over the data slice, writing the run directory. Returns the summary.

    Holds the run directory's lock throughout (RunLocked for a second writer). A directory that already holds
    a run is refused unless `request.resume`: then the conversations it finished are kept and the others run
    again. The task (and judge) model answers one test call first (ModelUnavailable if not). A Ctrl-C writes
    the manifest with `status: "interrupted"` and raises Interrupted; `request.max_failures` LM calls failing
    in a row stop the run with `status: "failed"` (the summary says why; what finished is kept).
    """
    from memtrace_opt.lm.roles import check_roles

    started = time.time()
    dataset = dataset if dataset is not None else load_data(request.data, request.data_slice)
    if not any(c.questions for c in dataset.conversations):
        raise DatasetError(f"{request.data}: the data slice {request.data_slice.describe()} selects no questions "
                           f"({len(dataset.conversations)} conversations); widen --sessions / --category / --limit")
    program = make_program(request.system, validate_program_settings(request.system, request.program_settings))
    if request.program_path is not None:
        load_program_state(program, request.program_path)
    if models is None:
        if request.check_models:
            check_roles(request.roles, ("task", "judge") if request.judge else ("task",))
        models = Models.from_roles(request.roles)
    run = RunDir(request.out)
    with run.lock("run"):
        config = _run_config(request, program, dataset)
        done: dict[str, list[CaseRecord]] = {}
        prior: dict[str, Any] = {}
        if run.has_artifacts():
            if not request.resume:
                if run.read_manifest().get("status", "complete") == "complete" and run.cases_path.exists():
                    raise MemtraceError(f"{run.root} already holds a run (cases.jsonl); choose another --out or "
                                        "remove it")
                raise MemtraceError(f"{run.root} holds an unfinished run; continue it with `memtrace run --resume` "
                                    "and the same settings, or choose another --out")
            _check_resumable(run, config)
            prior = run.read_manifest()
            done = _finished(run, dataset)
        run.create(fresh=False)
        run.write_config(config)
        if not prior:
            prior = {"started_at": datetime.fromtimestamp(started, timezone.utc).isoformat()}
            run.write_manifest({"kind": "run", "status": "running", **prior})
        return _run_conversations(request, run, program, models, dataset, done, prior, started,
                                  console=console, progress=progress)


def _run_conversations(
    request: RunRequest,
    run: RunDir,
    program: MemoryProgram,
    models: Models,
    dataset: Dataset,
    done: dict[str, list[CaseRecord]],
    prior: dict[str, Any],
    started: float,
    *,
    console: Console | None,
    progress: bool,
) -> RunSummary:
    """The conversations of `dataset` not in `done`, then the manifest (with `prior`'s usage and time added)."""
    from memtrace_opt.tracing import (
        EventWriter,
        build_graph,
        program_instructions,
        save_graph,
        trace_conversation,
    )
    from memtrace_opt.tracing.lineage_check import LineageCheck, describe_breaks, lineage_check

    judge = _make_judge() if request.judge else None
    judge_lm = models.judge if request.judge else None
    instructions = program_instructions(program)
    rows: list[ScoreRow] = [_row(c) for cases in done.values() for c in cases]
    rows_lock = threading.Lock()
    op_failures_by = {k: int(v) for k, v in (prior.get("op_failures_by_conversation") or {}).items() if k in done}
    stop = threading.Event()
    stopped_why: list[str] = []
    todo = [c for c in dataset.conversations if c.sample_id not in done]
    resumed = "status" in prior  # the manifest of an earlier process: this one resumes its run
    tracker = _Progress(dataset, models, console, progress)
    lineage: list[LineageCheck] = []  # list.append is atomic: conversation threads append concurrently
    for conversation in dataset.conversations:
        if conversation.sample_id in done:
            tracker.skip(conversation)

    def check() -> None:
        if not stop.is_set() and request.max_failures and models.usage.failure_streak >= request.max_failures:
            stopped_why.append(f"{models.usage.failure_streak} LM calls failed in a row")
            stop.set()
        if stop.is_set():
            raise _Stopped

    def manifest(status: str, **more: Any) -> dict[str, Any]:
        with rows_lock:
            table = category_table(rows)
            counted = list(rows)
        data = {
            "kind": "run",
            "status": status,
            "versions": versions(),
            "started_at": prior.get("started_at") or datetime.fromtimestamp(started, timezone.utc).isoformat(),
            "ended_at": datetime.now(timezone.utc).isoformat(),
            "seconds": round(float(prior.get("seconds") or 0.0) + time.time() - started, 2),
            "resumed": int(prior.get("resumed") or 0) + int(resumed),
            "usage": add_usage(_prior_usage(prior), models.usage.to_dict()),
            "counts": {
                "conversations": len(dataset.conversations),
                "conversations_done": len(op_failures_by),
                "questions": len(counted),
                "correct": sum(r.correct for r in counted),
                "op_failures": sum(op_failures_by.values()),
            },
            "op_failures_by_conversation": dict(sorted(op_failures_by.items())),
            "accuracy": table.to_dict(),
            **more,
        }
        run.write_manifest(data)
        return data

    def one_conversation(conversation: Conversation) -> None:
        check()
        graph_rel = str(run.graph_path(conversation.sample_id).relative_to(run.root))
        questions = {q.question_id: q for q in conversation.questions}

        def on_session_done(*_: Any) -> None:
            tracker.session_done()
            check()

        def on_question_done(question: Question, answer: str, prediction: Any) -> None:
            tracker.question_done()
            check()

        meta = {
            "system": request.system,
            "dataset": dataset.name,
            "sample_id": conversation.sample_id,
            "models": models.names(),
            "instructions": instructions,
            "program": program.config.to_dict(),
        }
        writer = EventWriter(run.events_path(conversation.sample_id), background=True)
        with dspy.context(lm=models.task), contextlib.closing(writer):
            traced = trace_conversation(
                program,
                conversation,
                list(conversation.questions),
                writer=writer,
                meta=meta,
                on_session_done=on_session_done,
                on_question_done=on_question_done,
            )
        graph = build_graph(traced.events)
        save_graph(graph, run.graph_path(conversation.sample_id))
        lineage.append(lineage_check(graph))
        # Judge after the conversation's questions are answered: interleaving judge calls with answer calls
        # would evict the answer prompts' shared prefix from a local model's KV cache. The answers are already
        # safe in events.jsonl.
        records = [_case(request, dataset, conversation, questions[qid], answer, traced.errors.get(qid), graph_rel,
                         judge=judge, judge_lm=judge_lm) for qid, answer in traced.answers.items()]
        for record in records:
            run.append_case(record)
        with rows_lock:
            rows.extend(_row(r) for r in records)
            op_failures_by[conversation.sample_id] = len(traced.failures)
        manifest("running")

    status, why = "complete", ""
    try:
        with tracker.running():
            if request.threads > 1 and len(todo) > 1:
                pool = ThreadPoolExecutor(max_workers=request.threads)
                try:
                    for future in [pool.submit(one_conversation, c) for c in todo]:
                        try:
                            future.result()
                        except _Stopped:
                            pass
                finally:  # on Ctrl-C: the running conversations stop at their next session or question
                    stop.set()
                    pool.shutdown(wait=True, cancel_futures=True)
            else:
                for conversation in todo:
                    try:
                        one_conversation(conversation)
                    except _Stopped:
                        break
    except KeyboardInterrupt:
        stop.set()
        manifest("interrupted")
        raise Interrupted(f"{run.root}: stopped; the finished conversations are kept "
                          "(continue with `memtrace run --resume` and the same settings)") from None
    except BaseException as error:
        manifest("failed", error=f"{type(error).__name__}: {error}")
        raise
    if stopped_why:
        status, why = "failed", f"stopped: {stopped_why[0]}"
    else:
        usage = models.usage.snapshot()
        task = usage.get("task")
        if task is not None and task.calls and task.failures == task.calls:
            status, why = "failed", f"all {task.calls} task LM calls failed"
    for line in describe_breaks(lineage):  # once per op, after every conversation
        log.warning("%s", line)
    final = manifest(status, **({"error": why} if why else {}))
    with rows_lock:
        table = category_table(rows)
    return RunSummary(
        run_dir=run.root,
        table=table,
        questions=final["counts"]["questions"],
        correct=final["counts"]["correct"],
        op_failures=final["counts"]["op_failures"],
        seconds=time.time() - started,
        usage=final["usage"],
        status=status,
        error=why or None,
    )


def _row(case: CaseRecord) -> ScoreRow:
    return ScoreRow(case.category, case.scores.get("f1") or 0.0, case.scores.get("judge"), case.correct,
                    case.scores.get("bleu1"))


def _case(request: RunRequest, dataset: Dataset, conversation: Conversation, question: Question, answer: str,
          error: str | None, graph_rel: str, *, judge: Any | None, judge_lm: dspy.LM | None) -> CaseRecord:
    scores, correct = score_case(question, answer, judge=judge, judge_lm=judge_lm)
    return CaseRecord(
        case_id=f"{request.system}:{question.question_id}",
        system=request.system,
        dataset=dataset.name,
        sample_id=conversation.sample_id,
        question_id=question.question_id,
        question=question.question,
        gold=question.answer,
        prediction=answer,
        category=question.category,
        evidence=list(question.evidence),
        abstention=question.abstention,
        scores=scores,
        correct=correct,
        graph=graph_rel,
        error=error,
    )


def _make_judge() -> Any:
    from memtrace_opt.metrics import LLMJudge

    return LLMJudge()
