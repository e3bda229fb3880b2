"""The run directory's lock across processes: a live holder is named and refused, a killed one is stale."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from memtrace_opt.errors import RunLocked
from memtrace_opt.rundir import RunDir

HOLD = textwrap.dedent("""
    import sys, time
    from memtrace_opt.rundir import RunDir
    lock = RunDir(sys.argv[1]).lock("run").acquire()
    print("held", flush=True)
    time.sleep(60)
""")


@pytest.fixture
def holder(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_a_live_holder_in_another_process_is_named_and_refused(tmp_path, holder):
    with pytest.raises(RunLocked, match=rf"`memtrace run` \(pid {holder.pid} on host "):
        RunDir(tmp_path / "run").lock("run").acquire()


def test_the_lock_of_a_killed_process_is_stale_and_taken_over(tmp_path, holder, caplog):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert RunDir(tmp_path / "run").lock_path.exists()  # SIGKILL left the file behind
    with RunDir(tmp_path / "run").lock("run"):
        assert "stale lock" in caplog.text
    assert not RunDir(tmp_path / "run").lock_path.exists()
