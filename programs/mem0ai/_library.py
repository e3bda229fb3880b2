"""The installed `mem0ai` library: imported offline and quiet, its version, and which pipeline that version runs.

Importing `mem0` writes `$MEM0_DIR/config.json` (default `~/.mem0/`) and reads `MEM0_TELEMETRY` once; with telemetry
on, its first `add()` calls out to the network. `import_mem0` turns telemetry off before the first import and points
`MEM0_DIR` at a temporary directory for that import only (removed right after), so nothing is sent anywhere and
nothing is left outside the run directory. A `mem0` another part of the process imported with telemetry on is
refused: it would call out.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
import tempfile
import threading
from enum import Enum
from types import ModuleType
from typing import Any

from memtrace_opt.errors import ConfigError

__all__ = ["INSTALL", "TESTED", "Pipeline", "import_mem0", "installed_version", "offline_config", "pipeline_of"]

INSTALL = "pip install 'memtrace-opt[mem0ai]'"
TESTED = ("2.2.1", "1.0.11")  # the versions the adapter is tested against (the extra pins the first)
_LOOPBACK = "http://127.0.0.1:9/v1"  # a port nothing listens on: the providers Mem0 builds are replaced, never called
_LOCK = threading.Lock()
# What Mem0 logs, once per Memory, when the optional parts it runs without are missing: said once, in `import_mem0`
_WITHOUT = ("fastembed not installed", "Failed to load spaCy")

log = logging.getLogger(__name__)


class Pipeline(str, Enum):
    """Which write path the installed Mem0 runs."""

    ADDITIVE = "additive"  # 2.x: one extraction call per add(), ADD only, hash-deduplicated
    CLASSIC = "classic"  # 1.0.x: fact extraction, then an ADD / UPDATE / DELETE / NONE decision


def installed_version() -> str | None:
    try:
        return importlib.metadata.version("mem0ai")
    except importlib.metadata.PackageNotFoundError:
        return None


def pipeline_of(version: str) -> Pipeline:
    """The pipeline of a Mem0 version; ConfigError for one the adapter does not know."""
    parts = version.split(".")
    if parts[0] == "2":
        return Pipeline.ADDITIVE
    if parts[:2] == ["1", "0"]:
        return Pipeline.CLASSIC
    raise ConfigError(f"mem0ai {version} is not supported (2.x or 1.0.x); install the tested one: {INSTALL}")


def import_mem0() -> ModuleType:
    """The `mem0` package, imported with telemetry off and its home directory kept out of the user's (module doc).
    ConfigError naming the install command when it is not installed or runs with telemetry on."""
    if installed_version() is None:
        raise ConfigError(f"--system mem0ai needs the mem0ai library: {INSTALL}")
    with _LOCK:
        if "mem0" not in sys.modules:
            _first_import()
            for name in ("mem0.vector_stores.qdrant", "mem0.utils.spacy_models"):
                logging.getLogger(name).addFilter(_said_once)
            log.info("mem0ai: keyword (BM25) scoring and entity boosts are off; they need Mem0's nlp and extras "
                     "packages, which download models at run time")
    import mem0.memory.telemetry as telemetry

    if telemetry.MEM0_TELEMETRY:
        raise ConfigError("mem0 was imported with its telemetry on, which calls out to the network: set "
                          "MEM0_TELEMETRY=False before anything imports mem0")
    return sys.modules["mem0"]


def _first_import() -> None:
    saved = {key: os.environ.get(key) for key in ("MEM0_TELEMETRY", "MEM0_DIR")}
    os.environ["MEM0_TELEMETRY"] = "False"
    with tempfile.TemporaryDirectory(prefix="mem0-home-") as home:
        os.environ["MEM0_DIR"] = home
        try:
            import mem0  # noqa: F401 - the import itself is the point
        finally:
            for key, value in saved.items():  # Mem0 read both at import; the process's own values come back
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _said_once(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_WITHOUT)


def offline_config(dims: int, collection: str = "mem0ai") -> dict[str, Any]:
    """The parts of a Mem0 configuration that keep it offline: Qdrant in memory, history in SQLite in memory, and
    OpenAI providers at an unused loopback port (replaced after construction by the traced ones)."""
    dummy = {"api_key": "unused", "openai_base_url": _LOOPBACK}
    return {
        "vector_store": {"provider": "qdrant",
                         "config": {"collection_name": collection, "path": ":memory:", "embedding_model_dims": dims}},
        "llm": {"provider": "openai", "config": {**dummy, "model": "memtrace-task-lm"}},
        "embedder": {"provider": "openai", "config": {**dummy, "embedding_dims": dims}},
        "history_db_path": ":memory:",
    }
