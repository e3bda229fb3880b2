"""What a test needs beyond the core install (an extra, a data file, a program): skipped where it is absent, and a
failure in CI (the `CI` variable set), where .ci/run installs every extra, so a missing piece is never a silent skip.

    llama_cpp = need_module("llama_cpp", "pip install -e '.[local]'")  # at module level or in a test
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return bool(os.environ.get("CI"))


def absent(what: str, fix: str) -> NoReturn:
    """Fail (in CI) or skip (elsewhere) because `what` is absent; `fix` says how to get it. Usable at module level."""
    if in_ci():
        pytest.fail(f"{what} is missing in CI: {fix}", pytrace=False)
    pytest.skip(f"{what} is absent ({fix})", allow_module_level=True)


def need_module(name: str, fix: str = "pip install -e '.[local,dev]'") -> ModuleType:
    """`name` imported; where it cannot be imported, `absent` (a failure in CI, a skip elsewhere)."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        absent(f"{name} ({error})", fix)


def need_mem0ai(major: str) -> str:
    """The installed mem0ai version when it starts with `major` ("2.", "1.0."); else `absent` for 2.x (the dev extra
    installs it), a skip for 1.0.x (.ci/run tests that version apart: one version is installed at a time)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found: str | None = version("mem0ai")
    except PackageNotFoundError:
        found = None
    if found is not None and found.startswith(major):
        return found
    if major == "2.":
        absent(f"mem0ai 2.x (installed: {found or 'none'})", "pip install -e '.[dev]'")
    pytest.skip(f"needs mem0ai {major}x (installed: {found or 'none'}); .ci/run runs it with that version apart")
