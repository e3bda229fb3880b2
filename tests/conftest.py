"""Shared fixtures. Tests are offline and deterministic; the real local model is behind the `embedded` marker."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402
import pytest  # noqa: E402

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
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing in CI: the benchmark data must be beside the checkout")
        pytest.skip(f"{path} is absent (the LoCoMo/LongMemEval files are not shipped with the package)")
    return path
