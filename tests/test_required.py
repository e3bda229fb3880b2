"""The guard for what a test needs beyond the core install: a skip on a developer's machine, a failure in CI."""

from __future__ import annotations

import pytest
from required import need_module


def test_a_missing_module_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_for_memtrace .*pip install extra"):
        need_module("no_such_module_for_memtrace", "pip install extra")


def test_a_missing_module_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_for_memtrace .*missing in CI: pip install extra"):
        need_module("no_such_module_for_memtrace", "pip install extra")


def test_a_present_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    assert need_module("json").dumps([1]) == "[1]"
