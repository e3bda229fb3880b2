"""`memtrace compare`: our loop against DSPy's optimizers on one program, metric, data and LM-call budget.

    summary = compare_optimizers(CompareRequest(system="mem0", data="locomo", train="conv-26",
                                                val="conv-30", test="conv-41", budget=200, out=Path("cmp")))

Every optimizer starts from the same warmed-up state: the student's memory of every conversation, its answers to
every train, validation and held-out question, its replay memo and the replies the model gave (the reply cache,
`memtrace_opt.lm.reply_cache`) are computed once, before any optimizer runs, and each optimizer, baselines
included, gets its own layer over that snapshot (nothing one learns is served to another). Each then has `budget`
LM calls that reach the model (task + reflection, plus attributor calls for the attribution-guided ones; a reply
the snapshot or the row's own cache serves costs nothing, and each row reports both counts); the optimized program
is tested on the held-out split with
the same metric, question by question against the unoptimized program: which questions it fixed and broke, a
paired bootstrap interval of the change and an exact sign test (`paired.py`; on a few dozen questions a
10-point change is seldom told from noise). Writes compare.json, compare.md, compare.png (held-out accuracy
against LM calls) and each optimizer's program under programs/<optimizer>.json (`load_optimized` or
`memtrace run --program` loads it).

compare.json is rewritten after each optimizer, so a crash keeps the finished rows. With `resume`, a comparison
whose compare.json was written with the same system, data, splits, budgets, loop settings, models and metric
keeps those rows and runs only the optimizers that have none (or ended in an error); the rows of optimizers not
asked this time stay in the table, after the others. The warm-up's replies are kept in `replies/warm-up.sqlite`
beside compare.json and each row's own in `replies/ROW.sqlite`, so a resumed run memorizes the conversations again
without the model, and a row cut before it finished is run again without the model up to where it was cut: each
reply it had is charged to its budget once more (as a live call), so the row spends what it would have in one
sitting.

Optimizer names: memtrace (our loop with `attribution`), blame_response (our loop, every failure blamed on the
answer op: optimizing without attribution), the ablations of our loop that differ only in how a round's
predictor is chosen or whether repairs or the diagnosed patterns are used: memtrace_roundrobin (the predictors in
program order, GEPA's default), memtrace_all (no attribution: every failure goes to every prompt, the predictors in
turn), memtrace_norepair (blame without repairs), memtrace_nopatterns (no pattern rules and no diagnosed mistake
shown to the reflection LM: what the diagnosis is worth), memtrace_nolocal (no local objective: the local check and
the minibatch rank the candidates, as before), memtrace_promptonly (no settings search: prompts only), and the DSPy
adapters of `baselines.py`: gepa, mipro, copro,
simba, bootstrap, gepa_attributed, and optuna_blind (`optuna_blind.py`: the settings search with no attribution).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import dspy

from memtrace_opt import progress
from memtrace_opt.data import load_data
from memtrace_opt.errors import ConfigError
from memtrace_opt.estimate import learn_replies
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.optimizers.comparison.baselines import BASELINES, run_baseline
from memtrace_opt.optimizers.comparison.paired import PairedDelta, paired_delta
from memtrace_opt.optimizers.comparison.plot import plot_accuracy_vs_calls, points_from_rows
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.optimizers.core.program_io import changed_prompts, demo_changes, save_program, settings_of
from memtrace_opt.optimizers.evaluation.cached import CachedEvaluator, EvalResult
from memtrace_opt.optimizers.evaluation.examples import (
    case_refs,
    evaluation_steps,
    make_examples,
    resolve_conversation,
)
from memtrace_opt.optimizers.evaluation.metric import AnswerMetric
from memtrace_opt.optimizers.evaluation.qa import QAContext, unwrap_memory
from memtrace_opt.optimizers.evaluation.splits import (
    HELD_OUT,
    NOT_HELD_OUT,
    SAME_CONVERSATION,
    SplitRequest,
    make_splits,
    same_splits,
)
from memtrace_opt.optimizers.loop.round_robin import RoundRobin
from memtrace_opt.optimizers.loop.routing import EveryPredictor
from memtrace_opt.optimizers.loop.settings import LoopSettings
from memtrace_opt.optimizers.loop.stop import StopReason
from memtrace_opt.optimizers.loop.story import rounds_lines
from memtrace_opt.optimizers.loop.teleprompter import METERED_ROLES, MemTraceOptimizer
from memtrace_opt.programs import make_program
from memtrace_opt.rundir import write_json

__all__ = ["OURS", "ALL_OPTIMIZERS", "ablation", "AnswerShape", "CompareRequest", "CompareRow", "CompareSummary",
           "compare_optimizers", "parse_optimizers"]

log = logging.getLogger(__name__)

# our loop's stop reason -> a row's `stopped_by`: "calls" (the LM-call budget) or "time" (the clock)
STOPPED_BY = {StopReason.BUDGET.value: "calls", StopReason.TIME.value: "time"}

OURS = ("memtrace", "blame_response", "memtrace_roundrobin", "memtrace_all", "memtrace_norepair", "memtrace_nopatterns",
        "memtrace_nolocal", "memtrace_promptonly")
# the ablations that differ from `memtrace` in one knob of the loop's settings (the others change the routing)
ABLATION_SETTINGS: dict[str, dict[str, Any]] = {
    "memtrace_norepair": {"repairs": 0},
    "memtrace_nopatterns": {"pattern_rules": False},  # no pattern rule, no diagnosed mistake told the reflection LM
    "memtrace_nolocal": {"local_objective": False},  # the local check and the minibatch rank, as before the local set
    "memtrace_promptonly": {"settings": False},  # prompts only: no settings search
}
ALL_OPTIMIZERS = (*OURS, *BASELINES)
DEFAULT_OPTIMIZERS = ("memtrace", "gepa", "mipro", "copro", "simba", "bootstrap", "blame_response")


def parse_optimizers(text: str | Sequence[str]) -> tuple[str, ...]:
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in ALL_OPTIMIZERS]
    if unknown:
        raise ConfigError(f"unknown optimizer {unknown[0]!r}; choose from {', '.join(ALL_OPTIMIZERS)}")
    if not names:
        raise ConfigError("--optimizers names no optimizer")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class CompareRequest(SplitRequest):
    optimizers: tuple[str, ...] = DEFAULT_OPTIMIZERS
    budget: int = 200
    time_budget: float | None = None  # seconds of wall time per optimizer, on top of the LM-call budget
    attribution: str = "graphtrace"
    loop: LoopSettings = field(default_factory=LoopSettings)
    judge: bool = False
    program_settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    resume: bool = False  # keep the rows of an earlier compare.json written by the same comparison


@dataclass
class CompareRow:
    optimizer: str
    baseline_accuracy: float
    optimized_accuracy: float | None
    lm_calls: int
    tokens: int
    seconds: float
    stopped_by_budget: bool = False
    changed_predictors: list[str] = field(default_factory=list)  # names: instruction or demos changed
    error: str | None = None
    calls_to_best: int | None = None
    details: dict[str, Any] = field(default_factory=dict)  # our loop's rounds (blame, candidates, decisions)
    demos: dict[str, int] = field(default_factory=dict)  # predictor -> demos it ends with, where they changed
    paired: PairedDelta | None = None  # question by question against the baseline on the held-out split
    answers: AnswerShape | None = None  # the held-out answers' mean F1 and length, before and after
    stopped_by: str | None = None  # with stopped_by_budget: "calls" (the LM-call budget) or "time" (the clock)
    cached_calls: int = 0  # metered calls a cache served (the warm-up's snapshot or the row's own): no model reached
    estimated_seconds: float | None = None  # what the estimate at the start said `seconds` would be (None: none made)
    settings_changed: dict[str, list[Any]] = field(default_factory=dict)  # setting -> [seed's, optimized]
    cost: dict[str, float] = field(default_factory=dict)  # the program's cost on the held-out conversations, and the seed's
    earlier_seconds: float = 0.0  # model time earlier sittings spent on a row they did not finish: in `seconds`
    # (the replies they paid for, `ReplyCache.carried_seconds`; its time limit is charged as they replay)

    def changed_label(self) -> str:
        """The table's `changed` cell: each changed predictor, with its demo count where its demos changed, and
        each changed setting."""
        def label(name: str) -> str:
            if name not in self.demos:
                return name
            count = self.demos[name]
            return f"{name} ({count} demo{'' if count == 1 else 's'})"

        def value(v: Any) -> str:
            return f"{v:.2f}" if isinstance(v, float) else str(v)

        settings = [f"{name} {value(old)} -> {value(new)}" for name, (old, new) in self.settings_changed.items()]
        return ", ".join([*map(label, self.changed_predictors), *settings]) or "-"

    def rounds_cell(self) -> str:
        """Our loop's rounds: how many ended, how many accepted a change, and one the budget cut ("-": not ours)."""
        rounds = self.details.get("rounds")
        if rounds is None:
            return "-"
        accepted = sum(bool(r.get("accepted")) for r in rounds)
        cut = " + 1 cut" if self.details.get("interrupted") else ""
        return f"{len(rounds)} ({accepted} accepted){cut}"

    def rounds_story(self) -> list[str]:
        """What our loop's rounds did, a line each (blame, candidates and their scores, the decision; the round
        the budget cut): [] for a row that is not ours."""
        if self.details.get("rounds") is None:
            return []
        stop = next((reason for reason, by in STOPPED_BY.items() if by == self.stopped_by), "")
        return rounds_lines(self.details, self.details.get("interrupted"), stop, max_lines=None)

    def trials_story(self) -> list[str]:
        """What a settings search's trials did (optuna_blind), a line each: [] for a row that kept none."""
        trials = self.details.get("trials")
        if not trials:
            return []
        seed = self.details.get("seed") or {}
        lines = [f"the seed: train {seed['train']:.3f}, valset {seed['valset']:.3f}"] if seed else []
        for trial in trials:
            settings = ", ".join(f"{k} {v}" for k, v in trial.get("settings", {}).items())
            if trial.get("refused"):
                how = f"refused for its cost: {trial['refused']}"
            elif trial.get("train") is None:
                how = "cut by the budget before it was scored"
            else:
                how = f"train {trial['train']:.3f}"
                if trial.get("valset") is not None:
                    how += f", valset {trial['valset']:.3f}, {'taken' if trial.get('taken') else 'not taken'}"
            lines.append(f"trial {trial.get('trial')} ({settings}): {how}")
        return lines

    def cost_cell(self) -> str:
        """LM calls per conversation and prompt words per answer, the seed's -> the optimized program's."""
        if not self.cost:
            return "-"
        return (f"{self.cost['seed_calls_per_conversation']:.1f} -> {self.cost['calls_per_conversation']:.1f} / "
                f"{self.cost['seed_prompt_words_per_answer']:.0f} -> {self.cost['prompt_words_per_answer']:.0f}")

    @property
    def delta(self) -> float | None:
        return None if self.optimized_accuracy is None else self.optimized_accuracy - self.baseline_accuracy

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "delta": self.delta, "paired": self.paired.to_dict() if self.paired else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompareRow:
        """A row as `to_dict` wrote it (compare.json's `rows`)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        paired, answers = values.pop("paired", None), values.pop("answers", None)
        return cls(**values,
                   paired=PairedDelta(**{**paired, "fixed": tuple(paired["fixed"]), "broken": tuple(paired["broken"])})
                   if paired else None,
                   answers=AnswerShape(**answers) if answers else None)


@dataclass(frozen=True)
class AnswerShape:
    """The held-out answers before and after optimizing: mean token F1 and mean length in words. Accuracy under
    the token rule rises when an answer grows to hold the gold words among many others; F1 falls then, and the
    word count shows it."""

    f1_before: float
    f1_after: float
    words_before: float
    words_after: float

    @classmethod
    def of(cls, before: EvalResult, after: EvalResult) -> AnswerShape:
        return cls(round(before.mean_f1, 4), round(after.mean_f1, 4), round(before.mean_words, 2),
                   round(after.mean_words, 2))

    def cells(self) -> tuple[str, str]:
        """The table's `mean F1` and `words` cells."""
        return (f"{self.f1_before:.3f} → {self.f1_after:.3f}", f"{self.words_before:.1f} → {self.words_after:.1f}")


# what the table calls the test's figure, by the splits' label of it
_TEST_COLUMN = {HELD_OUT: "held-out", SAME_CONVERSATION: "same-conversation"}


@dataclass
class CompareSummary:
    out: Path
    rows: list[CompareRow]
    baseline_accuracy: float
    test_questions: int
    test_label: str = HELD_OUT  # SAME_CONVERSATION when the test shares memory with train and val

    def markdown(self, title: str = "") -> str:
        column = _TEST_COLUMN.get(self.test_label, self.test_label)
        lines = [f"### {title}" if title else "", "",
                 f"| optimizer | {column} before | {column} after | delta | fixed / broken | 95% CI, p | mean F1 | words "
                 "| cost: calls / conv, prompt words / answer | LM calls (cached) | to best | tokens | wall s | stop | "
                 "rounds | changed |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in self.rows:
            after = "error" if row.optimized_accuracy is None else f"{row.optimized_accuracy:.3f}"
            delta = "" if row.delta is None else f"{row.delta * 100:+.1f} pts"
            stop = (row.stopped_by or "budget") if row.stopped_by_budget else ("error" if row.error else "own")
            to_best = "-" if row.calls_to_best is None else str(row.calls_to_best)
            moved, interval = row.paired.cells() if row.paired else ("-", "-")
            f1, words = row.answers.cells() if row.answers else ("-", "-")
            lines.append(f"| {row.optimizer} | {row.baseline_accuracy:.3f} | {after} | {delta} | {moved} | {interval} | "
                         f"{f1} | {words} | {row.cost_cell()} | {row.lm_calls} ({row.cached_calls}) | "
                         f"{to_best} | {row.tokens} | {row.seconds:.0f} | {stop} | {row.rounds_cell()} | "
                         f"{row.changed_label()} |")
        lines.append("")
        why = f" ({NOT_HELD_OUT})" if self.test_label == SAME_CONVERSATION else ""
        lines.append(f"{self.test_questions} {column} questions{why}; fixed / broken: questions wrong before and right after, "
                     "and the reverse; 95% CI: paired bootstrap interval of the delta in points, p: exact sign test on "
                     f"the fixed and broken questions; mean F1 and words: the {column} answers' token F1 and length, before "
                     "→ after (the token rule counts a long answer holding the gold words as right; F1 does not); "
                     "LM calls are task + reflection (+ attributor) calls that reached the model, beside those a cache "
                     "served; rounds: our loop's rounds (accepted, and a round the budget cut); "
                     "'to best': LM calls spent when the returned program was first reached; stop: the LM-call "
                     "budget (calls), the time budget (time) or the optimizer's own stop (own); cost: the program's "
                     "LM calls per test conversation and prompt words per answer, by a dry run, the unoptimized "
                     "program's -> the optimized one's.")
        stories = [(row.optimizer, story) for row in self.rows if (story := row.rounds_story())]
        if stories:
            lines += ["", "What our loop's rounds did (local: net targets, carried / targets, on the round's local "
                          "set; valset: the candidate's validation score):"]
            for name, story in stories:
                lines += [f"- {name}:", *(f"  - {line}" for line in story)]
        for row in self.rows:
            if trials := row.trials_story():
                lines += ["", f"What {row.optimizer}'s trials did (a trial that beats the best train score so far is "
                              "validated):", *(f"- {line}" for line in trials)]
        spanned = [f"{row.optimizer} ({row.earlier_seconds:,.0f} s)" for row in self.rows if row.earlier_seconds]
        if spanned:
            lines.append("")
            lines.append(f"Run over more than one sitting: {', '.join(spanned)} of model time in the earlier sittings, "
                         "counted in wall s and against the time budget; the replies those sittings paid for are "
                         "counted once more in LM calls.")
        return "\n".join(lines).lstrip() + "\n"


def _warm_context(student: Any, conversations: Sequence[Any], models: Models) -> QAContext:
    """A QAContext holding the student's memory of every conversation (its cost is nobody's budget; its replies
    are the warm-up's snapshot)."""
    context = QAContext()
    with dspy.context(lm=models.task):
        for index, conversation in enumerate(conversations, 1):
            key, conv = resolve_conversation(conversation)
            started = time.perf_counter()
            context.memorized(student, key, conv)
            log.info("memorized %s (%d/%d) in %.0f s", conv.sample_id, index, len(conversations),
                     time.perf_counter() - started)
    return context


def _ours(name: str, request: CompareRequest, student: Any, train: list[Any], val: list[Any], models: Models,
          context: QAContext, metric: AnswerMetric) -> tuple[Any, int, int, str | None, int, dict[str, Any]]:
    """Our loop on the request; returns the program, LM calls, tokens, what stopped it ("calls", "time" or None
    for its own stop), the calls to its best program and its rounds."""
    method = "blame_response" if name == "blame_response" else request.attribution
    values: dict[str, Any] = {"budget": request.budget, "time_budget": request.time_budget,
                              **ABLATION_SETTINGS.get(name, {})}
    settings = request.loop.with_values(values)
    order = tuple(n for n, _ in student.named_predictors())
    optimizer = MemTraceOptimizer(
        metric, task_lm=models.task, reflection_lm=models.reflection, attributor_lm=models.attributor,
        usage=models.usage, settings=settings, attribution=method, memo=context.memo.copy(),
        storage=None,  # an in-memory study: a comparison always starts from scratch (its replies are cached)
        replies=models.reply_cache, rates=_rates(models), **ablation(name, order),
    )
    program = optimizer.compile(student, trainset=train, valset=val)
    result = optimizer.result
    assert result is not None
    part = result.manifest_part()
    details = {k: v for k, v in part.items() if k in ("baseline", "rounds")}
    if "interrupted" in part["optimizer"]:
        details["interrupted"] = part["optimizer"]["interrupted"]
    # "budget" also when it stopped with calls left that could not take another candidate to a validation
    stopped_by = STOPPED_BY.get(result.stop_reason)
    return program, result.lm_calls, result.tokens, stopped_by, result.calls_to_best, details


def _rates(models: Models) -> Any:
    """The task model's rates on this machine where known (a round prices its phases with them), else None."""
    from memtrace_opt.estimate import job_rates

    rates, _ = job_rates(models, measure=False)
    return rates


def ablation(name: str, order: Sequence[str]) -> dict[str, Any]:
    """The optimizer arguments that make our loop the named ablation (`memtrace`: none): a selector, a failure
    routing, or the repairs off; everything else (proposer, gates, acceptance rule) is the same."""
    if name == "memtrace_roundrobin":
        return {"selector": RoundRobin(tuple(order))}
    if name == "memtrace_all":
        return {"selector": RoundRobin(tuple(order)), "routing": EveryPredictor()}
    return {}


def _setting(request: CompareRequest, splits: Any, metric: AnswerMetric) -> dict[str, Any]:
    """What makes two comparisons' rows comparable: compare.json's head, as JSON reads it back."""
    return json.loads(json.dumps({
        "schema_version": 2,  # 2: `loop` by the knobs' names (the flags'), flat
        "system": request.system,
        "data": request.data,
        "splits": splits.to_dict(),
        "budget": request.budget,
        "time_budget": request.time_budget,
        "loop": request.loop.to_dict(),  # our loop's settings (the budget and clock above replace its own)
        "metric": metric.name,
        "models": request.roles.to_dict(),
    }, default=str))


def _write_tables(summary: CompareSummary, setting: dict[str, Any], title: str, timing: dict[str, Any]) -> None:
    """compare.json (with this run's `timing`: its estimate and seconds so far) and compare.md with the rows so far."""
    write_json(summary.out / "compare.json", {**setting, **timing, "baseline_accuracy": summary.baseline_accuracy,
                                              "test_label": summary.test_label,
                                              "rows": [row.to_dict() for row in summary.rows]})
    (summary.out / "compare.md").write_text(summary.markdown(title), encoding="utf-8")


def _resumed_rows(out: Path, setting: dict[str, Any]) -> list[CompareRow]:
    """The finished rows of `out`'s compare.json, when the same comparison wrote it (else a ConfigError)."""
    path = out / "compare.json"
    if not path.exists():
        return []
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        head = {k: saved.get(k) for k in setting}
        rows = [CompareRow.from_dict(r) for r in saved.get("rows") or []]
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"{path}: cannot resume from it ({type(exc).__name__}: {exc}); use another --out") from None
    differing = [k for k in setting if not (same_splits(head[k], setting[k]) if k == "splits" else head[k] == setting[k])]
    if differing:
        raise ConfigError(f"{path} was written by another comparison (its {', '.join(differing)} differ); "
                          "use another --out, or run without --resume to start again")
    return [row for row in rows if row.error is None]


def _replies(out: Path, name: str, base: ReplyCache | None = None) -> ReplyCache:
    """The reply cache of the warm-up (`name` "warm-up") or of one row, over the warm-up's (`base`), in `out`. A row's
    replies kept by an earlier sitting that did not finish it are charged to its budget again (`carried`)."""
    path = out / "replies" / f"{name}.sqlite"
    return ReplyCache(path) if base is None else base.layered(path, carried=True)


def compare_optimizers(request: CompareRequest, *, models: Models | None = None,
                       on_row: Callable[[CompareRow], None] | None = None, estimate: bool | None = None) -> CompareSummary:
    """Every optimizer of `request` from the same warm-up, tested on the held-out questions (module docstring).
    Phases go to the current progress reporter; `estimate` (default: when one is installed) tells what the
    comparison will do and how long it should take first. compare.json keeps that `estimate` beside the `seconds`
    this run took (each row: `estimated_seconds` beside its `seconds`)."""
    started, out = time.perf_counter(), Path(request.out)
    dataset = load_data(request.data, request.data_slice)
    splits = make_splits(dataset, train=request.train, val=request.val, test=request.test, split=request.split,
                         per_split=request.per_split, seed=request.seed)
    if not splits.test:
        raise ConfigError("compare needs held-out test questions (--test, or a --split with a test share)")
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a usage error leaves no directory behind
    models = models if models is not None else Models.from_roles(request.roles)
    progress.watch(models.usage)
    metric = AnswerMetric(judge=request.judge, judge_lm=models.judge if request.judge else None)
    setting = _setting(request, splits, metric)
    title = f"{request.system} on {request.data}, budget {request.budget}, accuracy by {metric.name}"
    done = {row.optimizer: row for row in _resumed_rows(out, setting)} if request.resume else {}
    # the finished rows of optimizers not asked this time stay in the table, after the others
    kept = [row for name, row in done.items() if name not in request.optimizers]
    if done:
        log.info("%s: resuming with the rows of %s", request.system, ", ".join(done))
    student = make_program(request.system, request.program_settings)
    train, val = make_examples(splits.train), make_examples(splits.val)
    test_cases = case_refs(make_examples(splits.test))
    conversations = [*splits.train, *splits.val, *splits.test]
    log.info("%s: memorizing %d conversation slices (questions: %s)", request.system, len(conversations),
             splits.sizes())
    estimated = None
    if progress.active() if estimate is None else estimate:
        estimated = _estimate(request, student, models, splits, [n for n in request.optimizers if n not in done])
    parts = (estimated or {}).get("parts") or {}
    progress.stage(f"warm-up: memorize {len(conversations)} conversations, answer every question", level=1)
    warm = _replies(out, "warm-up")
    models.use_replies(warm)
    context = _warm_context(student, conversations, models)
    tester = CachedEvaluator(metric, memo=context.memo, task_lm=models.task, meta={"system": request.system},
                             threads=request.loop.threads)
    for cases in (case_refs(train), case_refs(val)):  # the seed's answers every row starts from
        tester.evaluate(student, cases)
    before = tester.evaluate(student, test_cases)
    learn_replies(models)  # the warm-up's reply lengths, kept before a row that may outlast the sitting
    baseline = before.accuracy
    log.info("%s: held-out accuracy before optimizing %.3f", request.system, baseline)
    rows: list[CompareRow] = []
    for number, name in enumerate(request.optimizers, 1):
        if name in done:
            rows.append(done[name])
            continue
        progress.stage(f"{name} ({number}/{len(request.optimizers)})", level=1)
        replies = _replies(out, name, warm)  # the warm-up's snapshot under the row's own replies
        models.use_replies(replies)
        row = _row(name, request, student, train, val, models, context, metric, tester, test_cases, before, out,
                   earlier=replies.carried_seconds())
        row.estimated_seconds = parts.get(name)
        learn_replies(models)  # how long the model's replies were: later estimates price them so
        rows.append(row)
        _write_tables(CompareSummary(out, [*rows, *kept], baseline, len(test_cases), splits.test_label),  # a crash
                      setting, title, _timing(estimated, started))  # keeps the rows
        if on_row is not None:
            on_row(row)
    models.use_replies(None)
    rows += kept
    summary = CompareSummary(out, rows, baseline, len(test_cases), splits.test_label)
    _write_tables(summary, setting, title, _timing(estimated, started))
    points = points_from_rows(rows, baseline)
    measure = f"{_TEST_COLUMN.get(summary.test_label, summary.test_label)} accuracy"
    plot_accuracy_vs_calls(points, baseline, out / "compare.png", title=f"{request.system}: {measure} vs LM calls",
                           measure=measure)
    return summary


def _row(name: str, request: CompareRequest, student: Any, train: list[Any], val: list[Any], models: Models,
         context: QAContext, metric: AnswerMetric, tester: CachedEvaluator, test_cases: Any, before: EvalResult,
         out: Path, earlier: float = 0.0) -> CompareRow:
    """One optimizer run from the warm context, tested on the held-out cases against `before`. `earlier`: the
    model time earlier sittings spent on this row, in its seconds (its time limit is charged as the row replays
    their replies: `LMBudget.now`)."""
    baseline, correct_before = before.accuracy, before.correctness()
    log.info("%s: running %s (budget %d LM calls)", request.system, name, request.budget)
    started = time.perf_counter()
    meter = LMBudget(models.usage, None, METERED_ROLES)
    stopped, error, program, to_best, ours_stop = False, None, student, None, None
    details: dict[str, Any] = {}
    try:
        if name in OURS:
            program, calls, tokens, ours_stop, to_best, details = _ours(name, request, student, train, val,
                                                                        models, context, metric)
            stopped = ours_stop is not None
        else:
            run = run_baseline(name, student, train, val, models=models, budget=request.budget, metric=metric,
                               context=context, seed=request.seed, time_budget=request.time_budget)
            program, calls, tokens, stopped, error, details = (run.program, run.lm_calls, run.tokens,
                                                               run.stopped_by_budget, run.error, run.details)
            to_best = run.calls_to_best
    except Exception as exc:  # noqa: BLE001 - one optimizer's crash is a row, not the end of the table
        log.exception("%s failed", name)
        calls, tokens, error = meter.spent(), meter.tokens(), f"{type(exc).__name__}: {exc}"
    stopped_by = ours_stop or (("calls" if calls >= request.budget else "time") if stopped else None)
    accuracy, paired, answers = None, None, None
    if error is None:
        progress.stage(f"{name}: held-out test", total=evaluation_steps(test_cases))
        after = tester.evaluate(program, test_cases)
        accuracy, paired = after.accuracy, paired_delta(correct_before, after.correctness(), seed=request.seed)
        answers = AnswerShape.of(before, after)
        # the winner is ready to deploy: `memtrace run --program DIR/programs/NAME.json`
        save_program(program, out / "programs" / f"{name}.json", extra={"optimizer": name})
    settings = {k: [v, settings_of(program)[k]] for k, v in settings_of(student).items() if settings_of(program)[k] != v}
    return CompareRow(name, baseline, accuracy, calls, tokens, time.perf_counter() - started + earlier, stopped,
                      changed_prompts(student, program), error, to_best, details, demo_changes(student, program),
                      paired, answers, stopped_by, settings_changed=settings, cached_calls=meter.cached(),
                      cost=_costs(student, program, test_cases) if error is None else {}, earlier_seconds=round(earlier, 3))


def _costs(student: Any, program: Any, cases: Any) -> dict[str, float]:
    """The seed's and the optimized program's cost on the held-out conversations (`program_cost`)."""
    from memtrace_opt.optimizers.gates.settings import program_cost

    try:
        seed, now = program_cost(unwrap_memory(student), cases), program_cost(unwrap_memory(program), cases)
    except Exception as error:  # noqa: BLE001 - a program the scripted fake LM cannot run has no dry-run cost
        log.warning("no cost for the table: the dry run failed (%s)", error)
        return {}
    return {"calls_per_conversation": round(now.calls_per_conversation, 2),
            "prompt_words_per_answer": round(now.prompt_words_per_answer, 1),
            "seed_calls_per_conversation": round(seed.calls_per_conversation, 2),
            "seed_prompt_words_per_answer": round(seed.prompt_words_per_answer, 1)}


def _timing(estimated: dict[str, Any] | None, started: float) -> dict[str, Any]:
    """compare.json's `estimate` (as `announce` returned it; None when none was made) and `seconds` (this run's
    wall time so far: with --resume, the run that ran the optimizers without a row)."""
    return {"estimate": estimated, "seconds": round(time.perf_counter() - started, 1)}


def _estimate(request: CompareRequest, student: Any, models: Models, splits: Any,
              names: list[str]) -> dict[str, Any]:
    """Say what the comparison will do and how long it should take; compare.json's `estimate`."""
    from memtrace_opt.optimizers.comparison.estimate import announce_estimate, compare_estimate

    sizes = splits.sizes()
    plan = (f"compare {', '.join(names) or 'no optimizers'} on {request.system}, {request.data}: train "
            f"{sizes['train']} / val {sizes['val']} / test {sizes['test']} questions; each optimizer "
            f"{request.budget} LM calls" + (f" or {request.time_budget:g} s" if request.time_budget else ""))
    return announce_estimate(plan, student, splits, models, judge=request.judge,
                             reply_cap=request.roles.spec("task").max_tokens, estimate=lambda work, rates:
                             compare_estimate(work, splits, names, rates, budget=request.budget,
                                              time_budget=request.time_budget, judge=request.judge))
