"""`memtrace run`: run a memory system over a dataset slice, traced, scored, into a run directory.

The plain function `run_system(RunRequest)` is what the CLI and the tests call. Each conversation gets a fresh
`MemoryState` and its own trace. Trace events (answers included) are flushed to events.jsonl as they happen; a
conversation's graph and scored cases are written when it finishes, so a crash keeps every event and every
finished conversation.
"""

from __future__ import annotations

import contextlib
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

from memtrace_opt.data import Conversation, Dataset, DataSlice, Question, load_data
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.metrics import CategoryTable, ScoreRow, category_table, score_answer
from memtrace_opt.programs import MemoryProgram, make_program
from memtrace_opt.rundir import CaseRecord, RunDir, versions

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


@dataclass(frozen=True)
class RunSummary:
    run_dir: Path
    table: CategoryTable
    questions: int
    correct: int
    op_failures: int
    seconds: float
    usage: dict[str, dict[str, Any]]


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


def run_system(
    request: RunRequest,
    *,
    console: Console | None = None,
    progress: bool = True,
    models: Models | None = None,
    dataset: Dataset | None = None,
) -> RunSummary:
    """Run `request.system` over the data slice, writing the run directory. Returns the summary."""
    from memtrace_opt.tracing import (
        EventWriter,
        build_graph,
        program_instructions,
        save_graph,
        trace_conversation,
    )
    from memtrace_opt.tracing.lineage_check import LineageCheck, describe_breaks, lineage_check

    started = time.time()
    dataset = dataset if dataset is not None else load_data(request.data, request.data_slice)
    program = make_program(request.system, request.program_settings)
    if request.program_path is not None:
        load_program_state(program, request.program_path)
    models = models if models is not None else Models.from_roles(request.roles)
    run = RunDir(request.out).create()
    run.write_config(
        {
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
    )
    judge = _make_judge() if request.judge else None
    judge_lm = models.judge if request.judge else None
    instructions = program_instructions(program)
    rows: list[ScoreRow] = []
    rows_lock = threading.Lock()
    op_failures = 0
    tracker = _Progress(dataset, models, console, progress)
    lineage: list[LineageCheck] = []  # list.append is atomic: conversation threads append concurrently

    def one_conversation(conversation: Conversation) -> int:
        graph_rel = str(run.graph_path(conversation.sample_id).relative_to(run.root))
        questions = {q.question_id: q for q in conversation.questions}

        def on_question_done(question: Question, answer: str, prediction: Any) -> None:
            tracker.question_done()

        def record(question_id: str, answer: str, error: str | None) -> None:
            question = questions[question_id]
            scores, correct = score_case(question, answer, judge=judge, judge_lm=judge_lm)
            run.append_case(
                CaseRecord(
                    case_id=f"{request.system}:{question_id}",
                    system=request.system,
                    dataset=dataset.name,
                    sample_id=conversation.sample_id,
                    question_id=question_id,
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
            )
            with rows_lock:
                rows.append(ScoreRow(question.category, scores["f1"] or 0.0, scores["judge"], correct, scores["bleu1"]))

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
                on_session_done=tracker.session_done,
                on_question_done=on_question_done,
            )
        graph = build_graph(traced.events)
        save_graph(graph, run.graph_path(conversation.sample_id))
        lineage.append(lineage_check(graph))
        # Judge after the conversation's questions are answered: interleaving judge calls with answer calls
        # would evict the answer prompts' shared prefix from a local model's KV cache. The answers are already
        # safe in events.jsonl.
        for question_id, answer in traced.answers.items():
            record(question_id, answer, traced.errors.get(question_id))
        return len(traced.failures)

    with tracker.running():
        if request.threads > 1 and len(dataset.conversations) > 1:
            with ThreadPoolExecutor(max_workers=request.threads) as pool:
                op_failures = sum(pool.map(one_conversation, dataset.conversations))
        else:
            op_failures = sum(one_conversation(c) for c in dataset.conversations)

    table = category_table(rows)
    for line in describe_breaks(lineage):  # once per op, after every conversation
        log.warning("%s", line)
    seconds = time.time() - started
    usage = models.usage.to_dict()
    run.write_manifest(
        {
            "kind": "run",
            "versions": versions(),
            "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(),
            "ended_at": datetime.now(timezone.utc).isoformat(),
            "seconds": round(seconds, 2),
            "usage": usage,
            "counts": {
                "conversations": len(dataset.conversations),
                "questions": len(rows),
                "correct": sum(r.correct for r in rows),
                "op_failures": op_failures,
            },
            "accuracy": table.to_dict(),
        }
    )
    return RunSummary(
        run_dir=run.root,
        table=table,
        questions=len(rows),
        correct=sum(r.correct for r in rows),
        op_failures=op_failures,
        seconds=seconds,
        usage=usage,
    )


def _make_judge() -> Any:
    from memtrace_opt.metrics import LLMJudge

    return LLMJudge()
