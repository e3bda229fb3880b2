"""Run directories for the report tests: the demo Mem0 run, small and with a thousands-of-nodes graph."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memtrace_opt.report.browser import find_chromium
from memtrace_opt.report.demo_run import write_demo_run


@pytest.fixture
def demo_run(tmp_path: Path) -> Path:
    return write_demo_run(tmp_path / "run")


@pytest.fixture(scope="session")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same seven questions in a conversation graph of about 4,000 nodes."""
    return write_demo_run(tmp_path_factory.mktemp("big") / "run", filler_sessions=300)


@pytest.fixture(scope="module")
def chromium() -> str:
    """Headless Chromium's path: required in CI, else the browser tests skip."""
    path = find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI: apt-get install -y chromium")
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); CI runs this test")
    return path
