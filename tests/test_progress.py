"""Live progress: phases reported by library code, shown by a terminal or a log reporter, never breaking the job;
and the time estimate a job states, within 2x of the time it takes on a fake LM slowed to a known rate."""

from __future__ import annotations

import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from memtrace_opt import progress
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.lm.usage import UsageTracker
from memtrace_opt.optimizers.optimize import OptimizeRequest, apply_preset, optimize_system
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.testing import FakeEngine
from memtrace_opt.testing.skills import default_skills

FAKE = ModelRoles(task=ModelSpec(model="fake"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A reporter that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def open(self, meter: progress.Meter) -> None:
        self.events.append(("open", ""))

    def start(self, phase: progress.Phase) -> None:
        self.events.append(("start", phase.name))

    def advance(self, phase: progress.Phase) -> None:
        self.events.append(("advance", f"{phase.name} {phase.count_text()}"))

    def end(self, phase: progress.Phase) -> None:
        self.events.append(("end", phase.name))

    def note(self, text: str) -> None:
        self.events.append(("note", text))

    def close(self, error: BaseException | None) -> None:
        self.events.append(("close", type(error).__name__ if error else ""))


class Exploding(Recorder):
    """A reporter whose every method raises."""

    def __getattribute__(self, name: str) -> Any:
        if name in ("open", "start", "advance", "end", "note", "close"):
            def boom(*args: Any) -> None:
                raise RuntimeError(f"display broke in {name}")
            return boom
        return super().__getattribute__(name)


def slow_models(prompt: float = 0.0002, completion: float = 0.001) -> Models:
    engine = FakeEngine(skills=default_skills(), prompt_token_seconds=prompt, completion_token_seconds=completion)
    return Models(FAKE, fake_engine=engine)


# the mechanism --------------------------------------------------------------------------------------------
def test_without_a_reporter_every_call_is_a_no_op():
    assert not progress.active()
    with progress.phase("memorize", total=2) as phase:
        progress.advance(progress.SESSION)
    progress.stage("round 1: plan")
    progress.note("nothing shows this")
    assert phase.done == 0  # nobody counted


def test_phases_count_their_units_and_end_when_complete():
    recorder = Recorder()
    with progress.reporting(recorder):
        with progress.phase("memorize", 2, (progress.SESSION,)), progress.phase("answer", 3, (progress.QUESTION,)):
            progress.advance(progress.SESSION)
            progress.advance(progress.QUESTION, 2)
            progress.advance(progress.SESSION)  # memorize is complete: it ends now, answer goes on
            assert recorder.events[-1] == ("end", "memorize")
    assert ("advance", "answer 2/3") in recorder.events
    assert recorder.events[0] == ("open", "") and recorder.events[-1] == ("close", "")
    assert [e for e in recorder.events if e[0] == "end"] == [("end", "memorize"), ("end", "answer")]


def test_a_stage_ends_the_stages_at_its_level_and_below():
    recorder = Recorder()
    with progress.reporting(recorder):
        progress.stage("gepa (2/3)", level=1)
        progress.stage("round 1: plan")
        progress.stage("round 1: candidate 1/2")  # ends the plan, keeps the row
        progress.stage("memtrace (3/3)", level=1)  # ends the row and the optimizer's step
    ends = [name for kind, name in recorder.events if kind == "end"]
    assert ends == ["round 1: plan", "round 1: candidate 1/2", "gepa (2/3)", "memtrace (3/3)"]


def test_threads_a_pool_starts_report_to_the_installed_reporter():
    recorder = Recorder()
    with progress.reporting(recorder), progress.phase("answer", 4, (progress.QUESTION,)) as phase:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda _: progress.advance(progress.QUESTION), range(4)))
    assert phase.done == 4


def test_a_reporter_that_raises_never_breaks_the_work(caplog: pytest.LogCaptureFixture):
    with progress.reporting(Exploding()):
        with progress.phase("memorize", 1, (progress.SESSION,)):
            progress.advance(progress.SESSION)
        progress.note("still going")
    assert sum("progress display failed" in r.message for r in caplog.records) == 1  # logged once


def test_a_run_with_a_raising_reporter_completes(tmp_path: Path):
    request = RunRequest(system="rag", data="sample", out=tmp_path / "run", roles=FAKE, judge=False,
                         program_settings={"embedder": "hash"})
    with progress.reporting(Exploding()):
        summary = run_system(request, models=Models(FAKE))
    assert summary.status == "complete" and summary.questions == 13


def test_the_meter_counts_calls_since_watched_and_measures_the_eta():
    clock, usage = FakeClock(), UsageTracker()
    usage.record("task", prompt_tokens=500, completion_tokens=20)  # before: not this job's
    meter = progress.Meter(clock)
    meter.watch(usage)
    meter.watch(usage)  # once only
    meter.expect(progress.Expected(seconds=100.0, lm_calls=40))
    assert meter.status().eta == 100.0  # nothing measured yet: the estimate
    for _ in range(10):
        usage.record("task", prompt_tokens=100, completion_tokens=10)
    clock.now += 50.0
    status = meter.status()
    assert (status.lm_calls, status.prompt_tokens, status.completion_tokens) == (10, 1000, 100)
    assert status.tokens_per_s == pytest.approx(1100 / 50)
    assert status.eta == pytest.approx(30 * 5.0)  # 30 calls left at 5 s a call: slower than the estimate said
    assert "10 LM calls" in status.line() and "ETA 2:30" in status.line()


def test_replies_charged_again_pace_the_eta_at_the_seconds_they_took_when_paid_for():
    clock, usage = FakeClock(), UsageTracker()
    meter = progress.Meter(clock)
    meter.watch(usage)
    meter.expect(progress.Expected(seconds=1000.0, lm_calls=40))
    for _ in range(10):  # a resumed run replays an earlier sitting's replies in no time, charged as live calls
        usage.record("task", prompt_tokens=100, completion_tokens=10, seconds=5.0, replayed=True)
    clock.now += 10.0
    status = meter.status()
    assert status.lm_calls == 10 and status.elapsed == 10.0
    assert status.eta == pytest.approx(30 * 6.0)  # 60 s of model time for 10 calls, not 10 s: the next 30 at 6 s


def test_cache_hits_are_shown_apart_and_never_pace_the_eta():
    clock, usage = FakeClock(), UsageTracker()
    meter = progress.Meter(clock)
    meter.watch(usage)
    meter.expect(progress.Expected(seconds=100.0, lm_calls=20))
    for _ in range(30):
        usage.record("task", cached=True)  # a resumed run replays its replies: no model time, no budget
    for _ in range(4):
        usage.record("task", prompt_tokens=100, completion_tokens=10)
    clock.now += 20.0
    status = meter.status()
    assert (status.lm_calls, status.cached_calls) == (4, 30)
    assert "4 LM calls (+30 cached)" in status.line()
    assert status.eta == pytest.approx(16 * 5.0)  # 16 live calls left at 5 s each, not 30 hits counted as done
    assert "(+30 cached)" in progress.summary_line(status)



def test_a_second_estimate_is_measured_from_when_it_was_given():
    clock, usage = FakeClock(), UsageTracker()
    meter = progress.Meter(clock)
    meter.watch(usage)
    meter.expect(progress.Expected(seconds=60.0, lm_calls=6))  # the first part: done in 6 calls, 60 s
    for _ in range(6):
        usage.record("task", prompt_tokens=100, completion_tokens=10)
    clock.now += 60.0
    meter.expect(progress.Expected(seconds=300.0, lm_calls=10))  # the second part
    assert meter.status().eta == 300.0  # nothing of this part measured yet: its whole estimate
    for _ in range(4):
        usage.record("task", prompt_tokens=100, completion_tokens=10)
    clock.now += 40.0
    status = meter.status()
    assert status.lm_calls == 10 and status.elapsed == 100.0  # the job's totals
    assert status.eta == pytest.approx(6 * 10.0)  # this part's 6 calls left at its own 10 s a call


# the reporters --------------------------------------------------------------------------------------------
def test_for_stderr_picks_the_display(monkeypatch: pytest.MonkeyPatch):
    assert isinstance(progress.for_stderr(quiet=True), progress.NullReporter)
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert isinstance(progress.for_stderr(), progress.LogReporter)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert isinstance(progress.for_stderr(), progress.TerminalReporter)


def test_the_terminal_reporter_shows_each_phase_and_the_status_line():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    usage = UsageTracker()
    with progress.reporting(progress.TerminalReporter(console, refresh_per_second=20)):
        progress.watch(usage)
        progress.note("run rag on sample: 1 conversation")
        with progress.phase("answer", 2, (progress.QUESTION,)):
            usage.record("task", prompt_tokens=100, completion_tokens=5)
            progress.advance(progress.QUESTION)
            time.sleep(0.15)  # rich refreshes on its own thread while the work runs
            progress.advance(progress.QUESTION)
    text = out.getvalue()
    assert "run rag on sample: 1 conversation" in text
    assert "answer" in text and "1/2" in text and "1 LM calls" in text  # the live display while it ran
    assert "answer: done, 2/2" in text and "done in 0:00 · 1 LM calls" in text


def test_the_log_reporter_writes_a_line_per_phase():
    out = io.StringIO()
    with progress.reporting(progress.LogReporter(out, thread=False)):
        progress.stage("round 1: plan")
        progress.stage("round 1: validation", total=4, counts=(progress.QUESTION,))
        progress.advance(progress.QUESTION)
    lines = [line.split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines[0] == "round 1: plan"
    assert lines[1].startswith("round 1: plan: done in 0:00, 0 LM calls")
    assert lines[2] == "round 1: validation (0/4)"
    assert lines[3].startswith("round 1: validation: done, 1/4")
    assert lines[4].startswith("done in ")


def test_the_log_reporter_beats_at_least_once_a_minute():
    clock, out = FakeClock(), io.StringIO()
    reporter = progress.LogReporter(out, interval=60.0, thread=False)
    with progress.reporting(reporter, clock=clock):
        progress.stage("round 2: candidate 1/3")
        before = len(out.getvalue().splitlines())
        clock.now += 30.0
        reporter.tick()
        assert len(out.getvalue().splitlines()) == before  # a line 30 s ago: quiet
        for _ in range(3):
            clock.now += 61.0
            reporter.tick()
        beats = out.getvalue().splitlines()[before:]
    assert len(beats) == 3
    assert all("round 2: candidate 1/3" in line and "LM calls" in line for line in beats)
    assert "elapsed 3:33" in beats[-1]


def test_the_heartbeat_thread_stops_with_the_job():
    out = io.StringIO()
    reporter = progress.LogReporter(out, interval=0.05, poll=0.01)
    with progress.reporting(reporter):
        progress.stage("baseline: valset")
        time.sleep(0.3)
        thread = reporter._thread
        assert thread is not None and thread.is_alive()
    assert not thread.is_alive() and reporter._thread is None
    after = out.getvalue()
    time.sleep(0.1)
    assert out.getvalue() == after  # nothing once it closed
    assert sum("baseline: valset;" in line for line in after.splitlines()) >= 2  # heartbeats


def test_an_error_ends_the_display_without_a_last_line():
    out = io.StringIO()
    with pytest.raises(ValueError), progress.reporting(progress.LogReporter(out, thread=False)):
        progress.stage("round 1: plan")
        raise ValueError("a bad file")
    assert "done in" not in out.getvalue().splitlines()[-1]


def test_threads_see_no_reporter_after_the_job():
    seen: list[bool] = []
    with progress.reporting(Recorder()):
        pass
    worker = threading.Thread(target=lambda: seen.append(progress.active()))
    worker.start()
    worker.join()
    assert seen == [False]


# the time estimate ------------------------------------------------------------------------------------------
def test_run_states_its_estimate_and_keeps_it_within_2x(tmp_path: Path):
    out = io.StringIO()
    request = RunRequest(system="mem0", data="sample", out=tmp_path / "run", roles=FAKE,
                         program_settings={"embedder": "hash"})
    with progress.reporting(progress.LogReporter(out, thread=False)):
        run_system(request, models=slow_models())
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    estimate, actual = manifest["estimate"]["seconds"], manifest["seconds"]
    assert actual / 2 <= estimate <= actual * 2, (estimate, actual)
    assert manifest["estimate"]["rates"]["source"] == "known" and manifest["estimate"]["lm_calls"] > 0
    text = out.getvalue()
    assert "run mem0 on sample: 1 conversation, 3 sessions, 13 questions, judged by the LLM judge" in text
    assert "estimate: about " in text and "(memorize " in text


def test_optimize_quick_keeps_its_estimate_within_2x(tmp_path: Path):
    out = io.StringIO()
    request = apply_preset(OptimizeRequest(system="rag", data="sample", out=tmp_path / "opt", roles=FAKE,
                                           preset="quick", program_settings={"embedder": "hash"}), set())
    with progress.reporting(progress.LogReporter(out, thread=False)):
        optimize_system(request, models=slow_models(0.0003, 0.0015))  # the sleeps outweigh a loaded machine's overhead
    manifest = json.loads((tmp_path / "opt" / "manifest.json").read_text())
    estimate, actual = manifest["estimate"]["seconds"], manifest["seconds"]
    assert actual / 2 <= estimate <= actual * 2, (estimate, actual)
    assert set(manifest["estimate"]["parts"]) == {"baseline", "rounds", "held-out test"}
    text = out.getvalue()
    assert "optimize rag on sample: train " in text and "up to 2 rounds of 2 candidates, budget 60 LM calls" in text
    for phase in ("baseline: valset", "round 1: plan", "round 1: candidates",
                  "same-conversation questions"):  # the test phase, named by the label of its figure
        assert phase in text, phase


def test_no_estimate_without_rates_for_a_served_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from memtrace_opt.estimate import job_rates

    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path))
    served = ModelRoles(task=ModelSpec(model="openai/some-model", api_base="http://127.0.0.1:9/v1"))
    rates, why = job_rates(Models(served))
    assert rates is None and "run `memtrace doctor` once" in why


def test_a_threaded_run_reports_every_conversations_steps(tmp_path: Path):
    from runfixtures import write_conversations

    recorder = Recorder()
    request = RunRequest(system="long_context", data=str(write_conversations(tmp_path / "data.json")),
                         out=tmp_path / "run", roles=FAKE, judge=False, threads=3)
    with progress.reporting(recorder):
        run_system(request, models=Models(FAKE), estimate=False)
    advanced = [text for kind, text in recorder.events if kind == "advance"]
    assert {"memorize 3/3", "answer 6/6", "score 6/6"} <= set(advanced)  # the pool's threads reported too
    assert [name for kind, name in recorder.events if kind == "start"] == ["memorize", "answer", "score"]
    assert not any(kind == "note" for kind, _ in recorder.events)  # no estimate asked
