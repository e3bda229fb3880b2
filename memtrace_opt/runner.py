"""`memtrace run`: run a memory system over a dataset slice, traced, scored, into a run directory.

The plain function `run_system(RunRequest)` is what the CLI and the tests call. Each conversation gets a fresh
`MemoryState` and its own trace. Trace events (answers included) are flushed to events.jsonl as they happen; a
conversation's graph and scored cases are written when it finishes, so a crash keeps every event and every
finished conversation.
"""

from __future__ import annotations

import contextlib
import contextvars
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

from memtrace_opt import progress as report
from memtrace_opt.config_schema import validate_program_settings
from memtrace_opt.data import Conversation, Dataset, DataSlice, Question, load_data
from memtrace_opt.errors import ConfigError, DatasetError, Interrupted, MemtraceError
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.metrics import TOKEN_RULE, CategoryTable, ScoreRow, category_table, score_case
from memtrace_opt.programs import MemoryProgram, make_program
from memtrace_opt.redact import redact
from memtrace_opt.rundir import SCHEMA_VERSION, CaseRecord, RunDir, add_usage, versions

__all__ = ["RunRequest", "RunSummary", "run_system", "load_program_state"]

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


class _Stopped(Exception):  # noqa: N818 - a control signal between the callbacks and the runner
    """Raised in a conversation's callbacks once the run is stopping (Ctrl-C, or calls failing in a row)."""


def _run_config(request: RunRequest, program: MemoryProgram, dataset: Dataset) -> dict[str, Any]:
    return {
        "system": request.system,
        "program": program.config.to_dict(),
        "program_path": str(request.program_path) if request.program_path else None,
        "dataset": dataset.name,
        "data": {"spec": request.data, "path": str(dataset.path), "slice": request.data_slice.to_dict(),
                 "gold": dataset.gold_summary()},
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
    progress: bool = True,
    estimate: bool | None = None,
    models: Models | None = None,
    dataset: Dataset | None = None,
) -> RunSummary:
    """Run `request.system` over the data slice, writing the run directory. Returns the summary.

    Holds the run directory's lock throughout (RunLocked for a second writer). A directory that already holds
    a run is refused unless `request.resume`: then the conversations it finished are kept and the others run
    again. The task (and judge) model answers one test call first (ModelUnavailable if not). A Ctrl-C writes
    the manifest with `status: "interrupted"` and raises Interrupted; `request.max_failures` LM calls failing
    in a row stop the run with `status: "failed"` (the summary says why; what finished is kept).

    Progress (memorize, answer, score) goes to the current reporter (`memtrace_opt.progress`), or to stderr when
    none is installed; `progress=False` reports nothing. `estimate` (default: when progress is reported) tells
    what the run will do and how long it should take first, and keeps the estimate in the manifest.
    """
    if not progress:
        with report.silenced():
            return _run_system(request, bool(estimate), models, dataset)
    if report.active():
        return _run_system(request, estimate is not False, models, dataset)
    with report.reporting(report.for_stderr()):
        return _run_system(request, estimate is not False, models, dataset)


def _run_system(request: RunRequest, estimate: bool, models: Models | None, dataset: Dataset | None) -> RunSummary:
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
    report.watch(models.usage)
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
        estimated = _estimate(request, program, models, dataset, done) if estimate else None
        return _run_conversations(request, run, program, models, dataset, done, prior, started, estimated)


def _run_conversations(
    request: RunRequest,
    run: RunDir,
    program: MemoryProgram,
    models: Models,
    dataset: Dataset,
    done: dict[str, list[CaseRecord]],
    prior: dict[str, Any],
    started: float,
    estimated: dict[str, Any] | None,
) -> RunSummary:
    """The conversations of `dataset` not in `done`, then the manifest (with `prior`'s usage and time added, and
    the estimate of this process's share when there is one)."""
    from memtrace_opt.tracing.lineage_check import describe_breaks

    job = _Conversations(request, run, program, models, dataset, prior, started, _Tally.of(done, prior),
                         _StopSignal(models, request.max_failures), estimated)
    try:
        with _phases(dataset, done, judge=request.judge):
            job.run_all([c for c in dataset.conversations if c.sample_id not in done])
    except KeyboardInterrupt:
        job.stop.set()
        job.manifest("interrupted")
        raise Interrupted(f"{run.root}: stopped; the finished conversations are kept "
                          "(continue with `memtrace run --resume` and the same settings)") from None
    except BaseException as error:
        job.manifest("failed", error=f"{type(error).__name__}: {error}")
        raise
    finally:
        from memtrace_opt.estimate import learn_replies

        learn_replies(models)  # how long the model's replies were: later estimates price them so
    status, why = job.outcome()
    for line in describe_breaks(job.lineage):  # once per op, after every conversation
        log.warning("%s", line)
    final = job.manifest(status, **({"error": why} if why else {}))
    return RunSummary(
        run_dir=run.root,
        table=job.tally.table(),
        questions=final["counts"]["questions"],
        correct=final["counts"]["correct"],
        op_failures=final["counts"]["op_failures"],
        seconds=time.time() - started,
        usage=final["usage"],
        status=status,
        error=why or None,
    )


@dataclass
class _Tally:
    """What the finished conversations add up to: their scored rows and op failures. Conversation threads add to
    it concurrently (under `lock`)."""

    rows: list[ScoreRow]
    op_failures_by: dict[str, int]
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, done: dict[str, list[CaseRecord]], prior: dict[str, Any]) -> _Tally:
        """The tally of the conversations a resumed run keeps (`done`), with their op failures from `prior`."""
        kept = prior.get("op_failures_by_conversation") or {}
        return cls([_row(c) for cases in done.values() for c in cases],
                   {k: int(v) for k, v in kept.items() if k in done})

    def add(self, sample_id: str, records: list[CaseRecord], op_failures: int) -> None:
        with self.lock:
            self.rows.extend(_row(r) for r in records)
            self.op_failures_by[sample_id] = op_failures

    def table(self) -> CategoryTable:
        with self.lock:
            return category_table(self.rows)

    def counts(self, conversations: int) -> tuple[CategoryTable, dict[str, Any], dict[str, int]]:
        """The accuracy table, the manifest's `counts` and the op failures by conversation, read at once."""
        with self.lock:
            counted = list(self.rows)
            by = dict(sorted(self.op_failures_by.items()))
        counts = {
            "conversations": conversations,
            "conversations_done": len(by),
            "questions": len(counted),
            "correct": sum(r.correct for r in counted),
            "bare_numbers": sum(r.bare_number for r in counted),
            "op_failures": sum(by.values()),
        }
        return category_table(counted), counts, by


class _StopSignal:
    """Whether the run is stopping (Ctrl-C, or `max_failures` LM calls failing in a row), and why."""

    def __init__(self, models: Models, max_failures: int) -> None:
        self.models = models
        self.max_failures = max_failures
        self.event = threading.Event()
        self.why: list[str] = []

    def set(self) -> None:
        self.event.set()

    def check(self) -> None:
        """Raises _Stopped once the run is stopping; trips it when too many calls failed in a row."""
        streak = self.models.usage.failure_streak
        if not self.event.is_set() and self.max_failures and streak >= self.max_failures:
            self.why.append(f"{streak} LM calls failed in a row")
            self.event.set()
        if self.event.is_set():
            raise _Stopped


@dataclass
class _Conversations:
    """One run's conversations: each traced, its graph saved and its answers scored into the run directory."""

    request: RunRequest
    run: RunDir
    program: MemoryProgram
    models: Models
    dataset: Dataset
    prior: dict[str, Any]
    started: float
    tally: _Tally
    stop: _StopSignal
    estimated: dict[str, Any] | None = None  # the manifest's `estimate` (None: none was made)
    lineage: list[Any] = field(default_factory=list)  # list.append is atomic: conversation threads append

    def __post_init__(self) -> None:
        from memtrace_opt.tracing import program_instructions

        self.judge = _make_judge() if self.request.judge else None
        self.judge_lm = self.models.judge if self.request.judge else None
        self.instructions = program_instructions(self.program)
        self.resumed = "status" in self.prior  # the manifest of an earlier process: this one resumes its run

    def run_all(self, todo: list[Conversation]) -> None:
        """Every conversation of `todo`, `request.threads` at a time; the stopped ones end early."""
        if self.request.threads > 1 and len(todo) > 1:
            pool = ThreadPoolExecutor(max_workers=self.request.threads)
            try:
                for future in [pool.submit(contextvars.copy_context().run, self.one, c) for c in todo]:
                    with contextlib.suppress(_Stopped):
                        future.result()
            finally:  # on Ctrl-C: the running conversations stop at their next session or question
                self.stop.set()
                pool.shutdown(wait=True, cancel_futures=True)
            return
        for conversation in todo:
            try:
                self.one(conversation)
            except _Stopped:
                break

    def one(self, conversation: Conversation) -> None:
        """Trace `conversation`, save its graph, then judge and record its answers and checkpoint the manifest."""
        from memtrace_opt.tracing import EventWriter, build_graph, save_graph, trace_conversation
        from memtrace_opt.tracing.lineage_check import lineage_check

        self.stop.check()
        graph_path = self.run.graph_path(conversation.sample_id)
        writer = EventWriter(self.run.events_path(conversation.sample_id), background=True)
        with dspy.context(lm=self.models.task), contextlib.closing(writer):
            traced = trace_conversation(self.program, conversation, list(conversation.questions), writer=writer,
                                        meta=self._meta(conversation), on_session_done=self._session_done,
                                        on_question_done=self._question_done)
        graph = build_graph(traced.events)
        save_graph(graph, graph_path)
        self.lineage.append(lineage_check(graph))
        # Judge after the conversation's questions are answered: interleaving judge calls with answer calls
        # would evict the answer prompts' shared prefix from a local model's KV cache. The answers are already
        # safe in events.jsonl.
        questions = {q.question_id: q for q in conversation.questions}
        graph_rel = str(graph_path.relative_to(self.run.root))
        records = []
        for qid, answer in traced.answers.items():
            records.append(_case(self.request, self.dataset, conversation, questions[qid], answer,
                                 traced.errors.get(qid), graph_rel, judge=self.judge, judge_lm=self.judge_lm))
            report.advance(report.SCORED)
        for record in records:
            self.run.append_case(record)
        self.tally.add(conversation.sample_id, records, len(traced.failures))
        self.manifest("running")

    def _meta(self, conversation: Conversation) -> dict[str, Any]:
        return {
            "system": self.request.system,
            "dataset": self.dataset.name,
            "sample_id": conversation.sample_id,
            "models": self.models.names(),
            "instructions": self.instructions,
            "program": self.program.config.to_dict(),
        }

    def _session_done(self, *_: Any) -> None:  # trace_conversation reports the step itself
        self.stop.check()

    def _question_done(self, *_: Any) -> None:
        self.stop.check()

    def manifest(self, status: str, **more: Any) -> dict[str, Any]:
        """Write the manifest with `status` (and `more`): every process's usage and time, and the tally so far."""
        prior = self.prior
        table, counts, op_failures_by = self.tally.counts(len(self.dataset.conversations))
        data = {
            "kind": "run",
            "status": status,
            "versions": versions(),
            "started_at": prior.get("started_at") or datetime.fromtimestamp(self.started, timezone.utc).isoformat(),
            "ended_at": datetime.now(timezone.utc).isoformat(),
            "seconds": round(float(prior.get("seconds") or 0.0) + time.time() - self.started, 2),
            "resumed": int(prior.get("resumed") or 0) + int(self.resumed),
            "usage": add_usage(_prior_usage(prior), self.models.usage.to_dict()),
            "counts": counts,
            "op_failures_by_conversation": op_failures_by,
            "accuracy": table.to_dict(),
            "rule": TOKEN_RULE,
            **({"estimate": self.estimated} if self.estimated is not None else {}),
            **more,
        }
        self.run.write_manifest(data)
        return data

    def outcome(self) -> tuple[str, str]:
        """The run's status and why it failed ("" when complete): stopped, or every task LM call failed."""
        if self.stop.why:
            return "failed", f"stopped: {self.stop.why[0]}"
        task = self.models.usage.snapshot().get("task")
        if task is not None and task.calls and task.failures == task.calls:
            return "failed", f"all {task.calls} task LM calls failed"
        return "complete", ""


@contextlib.contextmanager
def _phases(dataset: Dataset, done: dict[str, list[CaseRecord]], *, judge: bool) -> Iterator[None]:
    """The run's phases, open together (conversations run in parallel): sessions memorized, questions answered,
    answers scored; the conversations a resumed run keeps count as done."""
    sessions = sum(len(c.sessions) for c in dataset.conversations)
    questions = sum(len(c.questions) for c in dataset.conversations)
    with report.phase("memorize", sessions, (report.SESSION,)), report.phase("answer", questions, (report.QUESTION,)), \
            report.phase("score" + (" (judge)" if judge else ""), questions, (report.SCORED,)):
        kept = [c for c in dataset.conversations if c.sample_id in done]
        report.advance(report.SESSION, sum(len(c.sessions) for c in kept))
        report.advance(report.QUESTION, sum(len(c.questions) for c in kept))
        report.advance(report.SCORED, sum(len(done[c.sample_id]) for c in kept))
        yield


def _estimate(request: RunRequest, program: MemoryProgram, models: Models, dataset: Dataset,
              done: dict[str, list[CaseRecord]]) -> dict[str, Any]:
    """Say what the run will do and how long it should take (its conversations not in `done`); the manifest's
    `estimate`."""
    from memtrace_opt.estimate import announce, count_work, job_rates, plural, run_estimate

    todo = [c for c in dataset.conversations if c.sample_id not in done]
    plan = (f"run {request.system} on {request.data}: {plural(len(todo), 'conversation')}, "
            f"{plural(sum(len(c.sessions) for c in todo), 'session')}, "
            f"{plural(sum(len(c.questions) for c in todo), 'question')}"
            + (", judged by the LLM judge" if request.judge else "")
            + (f" ({len(done)} finished conversations kept)" if done else ""))
    rates, why = job_rates(models)
    if rates is None:
        return announce(plan, None, why)
    try:
        work = count_work(program, todo, judge=request.judge, reply_cap=request.roles.spec("task").max_tokens)
    except Exception as error:  # noqa: BLE001 - a program the scripted fake LM cannot run still runs for real
        log.warning("no estimate: the dry run of %s failed: %s", request.system, error)
        return announce(plan, None, f"no estimate: the dry run failed ({type(error).__name__})")
    return announce(plan, run_estimate(work, todo, judge=request.judge, rates=rates))


def _row(case: CaseRecord) -> ScoreRow:
    return ScoreRow(case.category, case.scores.get("f1") or 0.0, case.scores.get("judge"), case.correct,
                    case.scores.get("bleu1"), bool(case.scores.get("bare_number")))


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
