"""One writer per run directory: an exclusive lock file, `<run>/.lock`, naming its holder.

    with RunLock(run_dir, command="run"):
        ...  # a second `memtrace run/optimize --out run_dir` gets RunLocked naming this pid and host

The file holds `{schema_version, pid, host, command, started_at}`. On POSIX the lock is an `flock` on the open
file, so the kernel drops it when the holder dies however it dies: a lock file left by a dead process is
stale and is simply taken over (logged). Without `flock` (Windows) the file is created exclusively and a file
whose pid is not alive on this host counts as stale. A lock held from another host is never broken: the
error names the host and says to delete the file if that run is gone.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from memtrace_opt.errors import RunLocked

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunLock", "LOCK_NAME"]

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
SCHEMA_VERSION = 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _holder(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    since = f" since {holder['started_at']}" if holder.get("started_at") else ""
    command = f"`memtrace {holder['command']}` " if holder.get("command") else ""
    return f"{command}(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}{since})"


class RunLock:
    """The exclusive lock of one run directory; a context manager. `acquire` raises RunLocked if held."""

    def __init__(self, root: str | Path, *, command: str = "") -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self.command = command
        self._fd: int | None = None

    def _record(self) -> bytes:
        return (json.dumps({"schema_version": SCHEMA_VERSION, "pid": os.getpid(), "host": socket.gethostname(),
                            "command": self.command,
                            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, sort_keys=True) + "\n").encode()

    def _refuse(self, holder: dict[str, Any]) -> RunLocked:
        return RunLocked(f"{self.root} is in use by {_describe(holder)}; wait for it to finish, or choose "
                         f"another --out (if that process is gone, delete {self.path})")

    def acquire(self) -> RunLock:
        self.root.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows
            return self._acquire_exclusive()
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise self._refuse(_holder(self.path)) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file its last holder unlinked between our open and our flock
                break
            os.close(fd)
        previous = _holder(self.path)
        if previous.get("pid") and previous.get("pid") != os.getpid():
            log.warning("%s: taking over the stale lock of %s", self.root, _describe(previous))
        os.ftruncate(fd, 0)
        os.write(fd, self._record())
        self._fd = fd
        return self

    def _acquire_exclusive(self) -> RunLock:  # pragma: no cover - Windows
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _holder(self.path)
                pid = holder.get("pid")
                if holder.get("host") == socket.gethostname() and isinstance(pid, int) and not _alive(pid):
                    log.warning("%s: removing the stale lock of %s", self.root, _describe(holder))
                    self.path.unlink(missing_ok=True)
                    continue
                raise self._refuse(holder) from None
            os.write(fd, self._record())
            self._fd = fd
            return self
        raise self._refuse(_holder(self.path))

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still holding the flock: a waiter re-checks the inode
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()
