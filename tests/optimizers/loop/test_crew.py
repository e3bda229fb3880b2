"""Workers sharing one optimization through its study (`loop/crew.py`): each in a process of its own
(`crew_worker.py`), the fake LM slowed so that the work overlaps. Two workers split the rounds' candidates and
validations, each run once, and end with the program one worker alone makes; a worker killed with SIGKILL
mid-job loses only that job, which the other runs again; a leader killed mid-round is replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from toydata import write_locomo

WORKER = Path(__file__).with_name("crew_worker.py")


def start(tmp_path: Path, name: str, storage: str | None, *, peers: int = 2, latency: float = 0.05) -> subprocess.Popen:
    # heartbeats every 2 s, a worker silent for 6 s is dead: short for the tests, long enough for a loaded machine
    argv = [sys.executable, str(WORKER), str(tmp_path / "toy.json"), str(tmp_path / name), "--latency", str(latency),
            "--heartbeat", "2"]
    if storage is not None:
        argv += ["--storage", storage, "--ready", str(tmp_path / "ready"), "--peers", str(peers)]
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def finish(tmp_path: Path, name: str, process: subprocess.Popen, timeout: float = 240) -> None:
    code = process.wait(timeout=timeout)
    assert code == 0, (tmp_path / f"{name}.log").read_text()[-4000:]


def program(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / name / "program.json").read_text())


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    write_locomo(tmp_path / "toy.json", sample_ids=("toy-a", "toy-b", "toy-c", "toy-d"))  # toy-d: toy-a, to train on
    return tmp_path


@pytest.fixture
def alone(toy: Path) -> dict:
    """The program one worker alone makes (no shared storage), in `toy/alone`."""
    finish(toy, "alone", start(toy, "alone", None, latency=0.0))
    return program(toy, "alone")


def studies(storage: str) -> tuple[optuna.Study, optuna.Study]:
    names = sorted(s.study_name for s in optuna.study.get_all_study_summaries(storage)
                   if "~settings:" not in s.study_name)  # each round's settings search keeps a study of its own
    assert len(names) == 2 and names[1] == names[0] + "~crew", names
    return optuna.load_study(study_name=names[0], storage=storage), optuna.load_study(study_name=names[1], storage=storage)


def pid_of(worker: str) -> int:
    return int(worker.rsplit(":", 1)[1])


def check_shared_run(storage: str, pids: set[int]) -> tuple[optuna.Study, optuna.Study]:
    """Every candidate's trial run once and finished; every job done once but those of a killed worker."""
    study, crew = studies(storage)
    assert all(study.user_attrs.get(f"round_done:{n}") for n in (1, 2, 3))
    finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    keys = Counter(t.user_attrs["key"] for t in finished)
    assert keys and max(keys.values()) == 1, keys
    assert all(pid_of(t.user_attrs["worker"]) in pids for t in finished)
    done = Counter(t.user_attrs["key"] for t in crew.trials
                   if t.user_attrs.get("kind") == "job" and t.state == TrialState.COMPLETE)
    assert done and max(done.values()) == 1, done
    return study, crew


def test_two_workers_split_the_rounds_and_end_with_the_program_of_one(toy, alone):
    storage = f"sqlite:///{toy / 'shared.db'}"
    workers = {name: start(toy, name, storage) for name in ("w1", "w2")}
    for name, process in workers.items():
        finish(toy, name, process)
    assert program(toy, "w1") == program(toy, "w2") == alone
    study, crew = check_shared_run(storage, {p.pid for p in workers.values()})
    assert {t.state for t in study.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    jobs = [t for t in crew.trials if t.user_attrs.get("kind") == "job"]
    assert {t.state for t in jobs} == {TrialState.COMPLETE}
    ran = Counter(pid_of(t.user_attrs["worker"]) for t in jobs)
    assert set(ran) == {p.pid for p in workers.values()}, ran  # both workers ran some
    split = Counter(t.user_attrs["conversation"].split("@")[0] for t in jobs
                    if t.user_attrs.get("job") in ("baseline", "val") and "conversation" in t.user_attrs)
    assert set(split) == {"toy-a", "toy-b"} and split["toy-a"] == split["toy-b"] > 1  # baseline and validations
    assert sum(t.user_attrs.get("job") == "attribute" for t in jobs) > 1  # each failure attributed by a job


def wait_for_job(storage: str, accept, timeout: float = 120.0) -> optuna.trial.FrozenTrial:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, crew = studies(storage)
        except (AssertionError, KeyError, ValueError):
            time.sleep(0.05)
            continue
        for trial in crew.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if accept(trial):
                return trial
        time.sleep(0.05)
    raise AssertionError("no job matching the test's wish ran in time")


def leader_of(crew: optuna.Study, phase: str) -> int | None:
    leads = [t for t in crew.get_trials(deepcopy=False) if t.user_attrs.get("phase") == phase
             and t.state == TrialState.RUNNING]
    return pid_of(leads[0].user_attrs["worker"]) if leads else None


def kill_one(toy: Path, storage: str, wish) -> tuple[int, optuna.Study]:
    """Two workers; the one running the first job `wish(trial, round_leader_pid)` takes is killed with SIGKILL
    mid-job; the other finishes, with the program of one worker alone. Returns the victim and the crew study."""
    workers = {name: start(toy, name, storage, latency=0.3) for name in ("w1", "w2")}
    pids = {p.pid: name for name, p in workers.items()}

    def accept(trial):
        if trial.user_attrs.get("kind") != "job" or "worker" not in trial.user_attrs:
            return False
        _, crew = studies(storage)
        phase = f"round-{trial.user_attrs['round']}" if "round" in trial.user_attrs else "baseline"
        return wish(trial, leader_of(crew, phase))

    victim = pid_of(wait_for_job(storage, accept).user_attrs["worker"])
    os.kill(victim, signal.SIGKILL)
    workers[pids[victim]].wait(timeout=30)
    survivor = next(name for pid, name in pids.items() if pid != victim)
    finish(toy, survivor, workers[survivor])
    assert program(toy, survivor) == program(toy, "alone")
    return victim, check_shared_run(storage, set(pids))[1]


def long(trial) -> bool:
    """A job of several LM calls (a part of a validation or of the baseline): a kill lands mid-job."""
    return trial.user_attrs.get("job") in ("val", "baseline") and "conversation" in trial.user_attrs


def test_a_worker_killed_mid_job_loses_only_that_job(toy, alone):
    storage = f"sqlite:///{toy / 'shared.db'}"
    keys: list[str] = []

    def a_follower_validates_a_candidate(trial, leader):
        keys.append(trial.user_attrs["key"])
        return trial.user_attrs["key"].startswith("val:") and long(trial) and pid_of(trial.user_attrs["worker"]) != leader

    victim, crew = kill_one(toy, storage, a_follower_validates_a_candidate)
    again = [t for t in crew.trials if t.user_attrs.get("key") == keys[-1]]
    assert [t.state for t in again] == [TrialState.FAIL, TrialState.COMPLETE]  # failed by the heartbeat, run again
    assert pid_of(again[1].user_attrs["worker"]) != victim


def test_a_leader_killed_mid_round_is_replaced(toy, alone):
    storage = f"sqlite:///{toy / 'shared.db'}"
    victim, crew = kill_one(toy, storage, lambda trial, leader: long(trial) and pid_of(trial.user_attrs["worker"]) == leader)
    leads = [t for t in crew.trials if t.user_attrs.get("kind") == "lead"]
    assert any(t.state == TrialState.FAIL and pid_of(t.user_attrs["worker"]) == victim for t in leads)
    assert any(t.state == TrialState.COMPLETE and pid_of(t.user_attrs["worker"]) != victim for t in leads)


def claim_all(url: str, ids: list[int]) -> list[int]:
    from memtrace_opt.optimizers.loop.crew import _claim_waiting

    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
    return [trial_id for trial_id in ids if _claim_waiting(storage, trial_id)]


def test_a_waiting_trial_is_claimed_by_exactly_one_of_the_processes_that_try(tmp_path):
    import multiprocessing

    from optuna.trial import create_trial

    url = f"sqlite:///{tmp_path / 'claims.db'}"
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(storage=storage)
    ids = [storage.create_new_trial(study._study_id, template_trial=create_trial(state=TrialState.WAITING))
           for _ in range(60)]
    with multiprocessing.get_context("fork").Pool(4) as pool:
        claimed = [trial_id for got in pool.starmap(claim_all, [(url, ids)] * 4) for trial_id in got]
    assert sorted(claimed) == sorted(ids)  # each once: SQLite ignores SELECT ... FOR UPDATE, the claim must not
    assert {storage.get_trial(trial_id).state for trial_id in ids} == {TrialState.RUNNING}


@pytest.fixture
def postgres_url() -> str:
    """An empty database on the server MEMTRACE_TEST_POSTGRES names (CI starts one: `.ci/postgres`)."""
    url = os.environ.get("MEMTRACE_TEST_POSTGRES")
    if not url:
        if os.environ.get("CI"):
            pytest.fail("MEMTRACE_TEST_POSTGRES is not set in CI: .ci/run starts a server with .ci/postgres")
        pytest.skip("no PostgreSQL server (set MEMTRACE_TEST_POSTGRES=postgresql://user:password@host/db)")
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:  # a clean slate: Optuna's tables from an earlier run are dropped
        connection.execute(sqlalchemy.text("drop schema public cascade; create schema public"))
    engine.dispose()
    return url


@pytest.mark.postgres
def test_two_workers_share_a_postgresql_study(toy, alone, postgres_url):
    workers = {name: start(toy, name, postgres_url) for name in ("w1", "w2")}
    for name, process in workers.items():
        finish(toy, name, process)
    assert program(toy, "w1") == program(toy, "w2") == alone
    _, crew = check_shared_run(postgres_url, {p.pid for p in workers.values()})
    ran = Counter(pid_of(t.user_attrs["worker"]) for t in crew.trials if t.user_attrs.get("kind") == "job")
    assert set(ran) == {p.pid for p in workers.values()}, ran


def test_a_shared_run_cut_by_its_budget_resumes_with_a_larger_one(tmp_path, planted, examples, monkeypatch):
    """The leader of a round cut short leaves it undecided: a later run with a larger budget leads it again. (The
    validations are priced at nothing, so the round reserves none and the budget cuts it: a wrong estimate is the
    one way a started round is cut by the call budget.)"""
    from optfixtures import make_models

    from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer
    from memtrace_opt.optimizers.loop.pricing import Price, Pricer

    monkeypatch.setattr(Pricer, "validation", lambda self, predictor, **_: Price(0, 0.0))

    storage = f"sqlite:///{tmp_path / 'study.db'}"

    def run(budget):
        settings = LoopSettings.of(rounds=3, candidates=2, minibatch=5, patience=3, budget=budget)
        opt = MemTraceOptimizer.from_models(make_models()[0], settings=settings, attribution="lineage",
                                            storage=storage, study_name="cut", shared=True, heartbeat=1)
        opt.compile(planted, trainset=examples, valset=examples)
        return opt.result

    first = run(20)
    assert first.stop_reason == "budget" and not first.rounds and first.interrupted and first.interrupted.round == 1
    second = run(None)
    assert [r.round for r in second.rounds] == [1, 2, 3] and second.rounds[0].accepted
    again = run(None)  # every round decided by the runs before: applied from the study, no LM call
    assert [r.round for r in again.rounds] == [1, 2, 3] and again.lm_calls == second.lm_calls
