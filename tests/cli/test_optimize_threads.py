"""`memtrace optimize --threads N` (or `optimize: {threads: N}` in --config) reaches the loop's evaluations."""

from __future__ import annotations

import pytest

from memtrace_opt.cli import main


@pytest.fixture
def captured(monkeypatch):
    """The OptimizeRequest the command builds; nothing is optimized."""
    import memtrace_opt.optimizers.optimize as optimize

    requests = []

    def fake_optimize_system(request, **_):
        requests.append(request)
        raise SystemExit(0)

    monkeypatch.setattr(optimize, "optimize_system", fake_optimize_system)
    return requests


def test_the_threads_flag_reaches_the_loop_settings(captured):
    with pytest.raises(SystemExit):
        main(["optimize", "--system", "rag", "--lm", "fake", "--threads", "3", "--out", "unused"])
    assert captured[0].settings.threads == 3


def test_the_config_sets_threads_and_the_flag_wins(captured, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("optimize:\n  threads: 2\n")
    with pytest.raises(SystemExit):
        main(["optimize", "--system", "rag", "--lm", "fake", "--config", str(config), "--out", "unused"])
    with pytest.raises(SystemExit):
        main(["optimize", "--system", "rag", "--lm", "fake", "--config", str(config), "--threads", "4",
              "--out", "unused"])
    assert [r.settings.threads for r in captured] == [2, 4]


def test_without_threads_the_loop_runs_one_conversation_at_a_time(captured):
    with pytest.raises(SystemExit):
        main(["optimize", "--system", "rag", "--lm", "fake", "--out", "unused"])
    assert captured[0].settings.threads == 1
