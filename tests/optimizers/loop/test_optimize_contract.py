"""`optimize_system`'s contract with the shell: one writer per run directory, a Ctrl-C leaves a manifest marked
interrupted, a resumed run's usage counts every process, and no trial of a killed process stays RUNNING."""

from __future__ import annotations

import optuna
import pytest
from optfixtures import make_models
from optuna.trial import TrialState
from toydata import write_locomo

from memtrace_opt.errors import Interrupted, RunLocked
from memtrace_opt.optimizers import LoopSettings
from memtrace_opt.optimizers.loop.study import default_storage
from memtrace_opt.optimizers.optimize import OptimizeRequest, optimize_system
from memtrace_opt.rundir import RunDir


def request_for(tmp_path) -> OptimizeRequest:
    data = tmp_path / "toy.json"
    if not data.exists():
        write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    return OptimizeRequest(system="mem0", data=str(data), out=tmp_path / "run", train="toy-a", val="toy-c",
                           test="toy-b", settings=LoopSettings.of(rounds=2, candidates=2, minibatch=5),
                           attribution="lineage")


def test_a_second_optimize_into_the_same_directory_is_refused(tmp_path):
    request = request_for(tmp_path)
    with RunDir(request.out).lock("optimize"):
        with pytest.raises(RunLocked, match="is in use by `memtrace optimize`"):
            optimize_system(request, models=make_models()[0])
    assert not (request.out / "optuna.db").exists()


def test_ctrl_c_marks_the_manifest_and_the_resumed_usage_is_cumulative(tmp_path):
    request = request_for(tmp_path)
    first, _ = make_models()

    def stop_after_the_first_round(record):
        raise KeyboardInterrupt

    with pytest.raises(Interrupted):
        optimize_system(request, models=first, on_round=stop_after_the_first_round)
    manifest = RunDir(request.out).read_manifest()
    assert manifest["status"] == "interrupted"
    spent = manifest["usage"]["task"]["calls"]
    assert spent == first.usage.snapshot()["task"].calls > 0

    second, _ = make_models()
    optimize_system(request, models=second)
    manifest = RunDir(request.out).read_manifest()
    assert manifest["status"] == "complete"
    assert manifest["usage"]["task"]["calls"] == spent + second.usage.snapshot()["task"].calls


def test_trials_a_killed_run_left_running_are_failed_on_resume(tmp_path):
    request = request_for(tmp_path)
    request.out.mkdir()
    study = optuna.create_study(study_name="killed", storage=default_storage(request.out))
    study.ask()  # a trial whose process died: RUNNING forever, until a resume says otherwise
    optimize_system(request, models=make_models()[0])
    states = [t.state for t in optuna.load_study(study_name="killed", storage=default_storage(request.out)).trials]
    assert states == [TrialState.FAIL]
