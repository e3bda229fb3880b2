"""Shared fixtures. Tests are offline and deterministic; the real local model is behind the `embedded` marker."""

from __future__ import annotations

import os
import socket
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402
from required import absent  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _reset_dspy_settings():
    """No test leaks an LM, adapter or callback into the next."""
    yield
    dspy.settings.configure(lm=None, adapter=None, callbacks=[])


def shared_data_path(*parts: str) -> Path:
    """A file under ../shared/data; skips where that folder is absent, except in CI where it must exist."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        absent(str(path), "the LoCoMo/LongMemEval files are not shipped with the package; CI keeps them beside "
                          "the checkout")
    return path


@pytest.fixture
def closed_api_base() -> str:
    """An OpenAI-compatible base URL on a loopback port nothing listens on (bound, then closed): a dead server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
