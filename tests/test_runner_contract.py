"""`run_system`'s contract with the shell: one writer per run directory, `resume` after a kill, Ctrl-C and
failing models leave a manifest that says so, empty slices are bad input."""

from __future__ import annotations

import json
import os
import socket

import pytest
from runfixtures import FAKE, failing_models, stopping_models, write_conversations

from memtrace_opt.errors import (
    ConfigError,
    DatasetError,
    Interrupted,
    MemtraceError,
    ModelUnavailable,
    RunLocked,
)
from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.rundir import RunDir, safe_name
from memtrace_opt.runner import RunRequest, run_system
from memtrace_opt.tracing import read_events

SETTINGS = {"embedder": "hash"}


def request_for(tmp_path, **changes) -> RunRequest:
    data = tmp_path / "three.json"
    if not data.exists():
        write_conversations(data)
    values = {"system": "rag", "data": str(data), "out": tmp_path / "run", "roles": FAKE, "judge": False,
              "program_settings": SETTINGS}
    return RunRequest(**{**values, **changes})


def test_a_second_writer_is_refused_with_the_holders_pid_and_host(tmp_path):
    request = request_for(tmp_path)
    with RunDir(request.out).lock("run"):
        with pytest.raises(RunLocked, match=rf"pid {os.getpid()} on host {socket.gethostname()}"):
            run_system(request, progress=False, models=Models(FAKE))
    assert not RunDir(request.out).cases_path.exists()  # the refused writer wrote nothing
    run_system(request, progress=False, models=Models(FAKE))  # released: the next writer runs
    assert not RunDir(request.out).lock_path.exists()


def test_a_stale_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    request = request_for(tmp_path)
    request.out.mkdir()
    RunDir(request.out).lock_path.write_text(json.dumps({"pid": 2**22 + 17, "host": socket.gethostname()}))
    summary = run_system(request, progress=False, models=Models(FAKE))
    assert summary.questions == 6


def test_interrupted_run_writes_what_finished_and_resume_completes_it_once(tmp_path):
    full = run_system(request_for(tmp_path, out=tmp_path / "full"), progress=False, models=Models(FAKE))
    request = request_for(tmp_path)
    models, gate = stopping_models(allow=full.usage["task"]["calls"] // 2)  # Ctrl-C inside the second conversation
    with pytest.raises(Interrupted):
        run_system(request, progress=False, models=models)
    run = RunDir(request.out)
    manifest = run.read_manifest()
    assert manifest["status"] == "interrupted" and manifest["counts"]["conversations_done"] == 1
    first_calls = manifest["usage"]["task"]["calls"]
    kept = {c.sample_id for c in run.read_cases()}
    assert kept == {"c-a"}

    with pytest.raises(MemtraceError, match="unfinished run; continue it with `memtrace run --resume`"):
        run_system(request, progress=False, models=Models(FAKE))

    again = Models(FAKE)
    summary = run_system(request_for(tmp_path, resume=True), progress=False, models=again)
    cases = run.read_cases()
    assert len(cases) == summary.questions == 6 and len({c.case_id for c in cases}) == 6  # nothing twice
    manifest = run.read_manifest()
    assert manifest["status"] == "complete" and manifest["resumed"] == 1
    assert manifest["usage"]["task"]["calls"] == first_calls + again.usage.snapshot()["task"].calls  # cumulative
    assert again.usage.snapshot()["task"].calls < full.usage["task"]["calls"]  # the finished conversation is kept
    for sample_id in ("c-a", "c-b", "c-c"):  # the unfinished conversation's old events were discarded
        assert sum(e.type == "run_start" for e in read_events(run.events_path(sample_id))) == 1


def test_a_run_killed_before_its_first_case_is_not_appended_to(tmp_path):
    request = request_for(tmp_path)
    models, _ = stopping_models(allow=1)
    with pytest.raises(Interrupted):
        run_system(request, progress=False, models=models)
    assert not RunDir(request.out).cases_path.exists()
    with pytest.raises(MemtraceError, match="--resume"):
        run_system(request, progress=False, models=Models(FAKE))
    run_system(request_for(tmp_path, resume=True), progress=False, models=Models(FAKE))
    events = read_events(RunDir(request.out).events_path("c-a"))
    assert sum(e.type == "run_start" for e in events) == 1


def test_resume_with_other_settings_is_refused(tmp_path):
    request = request_for(tmp_path)
    models, _ = stopping_models(allow=1)
    with pytest.raises(Interrupted):
        run_system(request, progress=False, models=models)
    with pytest.raises(ConfigError, match="system"):
        run_system(request_for(tmp_path, resume=True, system="long_context", program_settings={}),
                   progress=False, models=Models(FAKE))


def test_calls_failing_in_a_row_stop_the_run_as_failed(tmp_path):
    summary = run_system(request_for(tmp_path), progress=False, models=failing_models())
    assert summary.failed and "in a row" in (summary.error or "")
    manifest = RunDir(summary.run_dir).read_manifest()
    assert manifest["status"] == "failed" and manifest["usage"]["task"]["failures"] == 5
    assert manifest["counts"]["conversations_done"] < 3  # it stopped instead of failing every question


def test_a_model_that_cannot_answer_stops_the_run_before_it_starts(tmp_path):
    roles = ModelRoles(task=ModelSpec(model="openai/x", api_base="http://127.0.0.1:9/v1"))
    with pytest.raises(ModelUnavailable, match=r"task model openai/x at http://127.0.0.1:9/v1 .*refused"):
        run_system(request_for(tmp_path, roles=roles), progress=False)
    with pytest.raises(ModelUnavailable, match="task model foo/bar"):
        run_system(request_for(tmp_path, roles=ModelRoles(task=ModelSpec(model="foo/bar"))), progress=False)
    assert not (tmp_path / "run").exists()


def test_an_empty_slice_is_bad_input(tmp_path):
    from memtrace_opt.data import DataSlice

    with pytest.raises(DatasetError, match="selects no questions"):
        run_system(request_for(tmp_path, data_slice=DataSlice(sessions=(7, 7))), progress=False,
                   models=Models(FAKE))


def test_sample_ids_that_clean_to_one_name_get_their_own_files(tmp_path):
    assert safe_name("conv-26") == "conv-26"  # names of plain ids are what earlier releases wrote
    assert safe_name("conv/1") != safe_name("conv_1") and "/" not in safe_name("conv/1")
    data = write_conversations(tmp_path / "clash.json", ("conv/1", "conv_1"))
    summary = run_system(request_for(tmp_path, data=str(data)), progress=False, models=Models(FAKE))
    cases = RunDir(summary.run_dir).read_cases()
    assert len({c.graph for c in cases}) == 2
    assert len(list((summary.run_dir / "graphs").glob("*.json"))) == 2


def test_conversations_in_parallel_stop_together(tmp_path):
    summary = run_system(request_for(tmp_path, threads=3), progress=False, models=failing_models())
    assert summary.failed
    models, _ = stopping_models(allow=3)
    with pytest.raises(Interrupted):
        run_system(request_for(tmp_path, out=tmp_path / "b", threads=3), progress=False, models=models)
    assert RunDir(tmp_path / "b").read_manifest()["status"] == "interrupted"
