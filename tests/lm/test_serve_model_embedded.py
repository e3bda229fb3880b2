"""The real model served by `memtrace serve-model`, a system run against it through LiteLLM, and the same run
in-process (levers off: a served model has no prefix cache or grammar) at temperature 0: the same answers, or
each difference reported and at most half of them. Short: long_context on the packaged sample, two questions."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator

import pytest
from required import need_module

from memtrace_opt.data import DataSlice
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.rundir import RunDir
from memtrace_opt.runner import RunRequest, run_system

pytestmark = pytest.mark.embedded

NAME = "served-qwen"
QUESTIONS = 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    """The api_base of a `memtrace serve-model` process, stopped with SIGTERM afterwards."""
    need_module("llama_cpp.server.app", "pip install -e '.[serve]' (llama-cpp-python's server extra)")
    port = _free_port()
    command = [sys.executable, "-c", "from memtrace_opt.cli import main; main()", "serve-model", "--model",
               "embedded", "--port", str(port), "--name", NAME]
    log = tmp_path_factory.mktemp("serve-model") / "output.txt"
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
    api_base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while True:
            if process.poll() is not None:
                pytest.fail(f"serve-model exited {process.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(api_base + "/models", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"serve-model did not answer /v1/models within 600 s: {log.read_text()}")
            time.sleep(1)
        yield api_base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail("serve-model did not stop on SIGTERM within 60 s")


def _answers(tmp_path, name: str, spec: ModelSpec) -> dict[str, tuple[str, str | None]]:
    request = RunRequest(system="long_context", data="sample", out=tmp_path / name, roles=ModelRoles(task=spec),
                         judge=False, data_slice=DataSlice(limit=QUESTIONS))
    summary = run_system(request, progress=False)
    assert summary.usage["task"]["completion_tokens"] > 0
    return {c.question_id: (c.prediction, c.error) for c in RunDir(summary.run_dir).read_cases()}


def test_a_served_model_answers_as_the_in_process_engine(served, tmp_path):
    remote = _answers(tmp_path, "served", ModelSpec(model=f"openai/{NAME}", api_base=served,
                                                     extra={"cache": False}))
    local = _answers(tmp_path, "in-process", ModelSpec(model="embedded", extra={
        "cache": False, "prefix_cache_mb": 0, "aligned_reuse": False, "grammar": False}))

    assert set(remote) == set(local) and len(remote) == QUESTIONS
    assert all(error is None for _, error in remote.values())
    differences = {qid: (remote[qid][0], local[qid][0]) for qid in remote if remote[qid][0] != local[qid][0]}
    for qid, (served_answer, in_process) in differences.items():
        warnings.warn(f"{qid}: served {served_answer!r} vs in-process {in_process!r}", stacklevel=1)
    assert len(differences) <= QUESTIONS // 2, differences
