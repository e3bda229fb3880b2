"""The package's public API: every name resolves on first use, and the CLI loads the settings tree only."""

from __future__ import annotations

import subprocess
import sys

import pytest

import memtrace_opt.optimizers as optimizers


def test_every_exported_name_resolves():
    assert len(optimizers.__all__) > 50 and "LoopSettings" in optimizers.__all__
    for name in optimizers.__all__:
        assert getattr(optimizers, name) is not None
    assert set(optimizers.__all__) <= set(dir(optimizers))
    with pytest.raises(AttributeError, match="no attribute 'NotAThing'"):
        optimizers.NotAThing  # noqa: B018


def test_the_cli_does_not_load_the_loop():
    """`memtrace` builds its optimize/compare flags from the settings tree; the study (optuna) and the loop
    load only when a command runs."""
    code = ("import sys, memtrace_opt.cli; "
            "print(sorted(m for m in ('optuna', 'memtrace_opt.optimizers.loop.teleprompter') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
