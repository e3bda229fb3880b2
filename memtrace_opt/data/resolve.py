"""Finding dataset files by name, and downloading them from their home when they are missing.

`resolve_data(spec)` accepts a path, "locomo", "longmemeval" or "sample". Named datasets are looked
for, in order, under `../shared/data` next to the project checkout (or the current directory), under
$MEMTRACE_DATA_DIR, and in the user cache directory where `memtrace data fetch NAME` puts them. `load_data`
reads the corrected gold answers unless asked for the file's own (`data.gold`).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from memtrace_opt.data._types import DEFAULT_GOLD, Dataset
from memtrace_opt.data.gold import revise_gold
from memtrace_opt.data.loader import SAMPLE_PATH, load_dataset
from memtrace_opt.data.slicing import DataSlice, parse_data_spec
from memtrace_opt.errors import DatasetError

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "MEMTRACE_DATA_DIR"


@dataclass(frozen=True)
class DatasetSource:
    """Where a named dataset comes from and what its bytes must hash to."""

    name: str
    subdir: str
    filename: str
    url: str
    sha256: str
    homepage: str
    licence: str


SOURCES: dict[str, DatasetSource] = {
    "locomo": DatasetSource(
        name="locomo",
        subdir="locomo",
        filename="locomo10.json",
        url="https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json",
        sha256="79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
        homepage="https://github.com/snap-research/locomo",
        licence="CC BY-NC 4.0",
    ),
    # The hash is that of the oracle file the project's tests were written against.
    "longmemeval": DatasetSource(
        name="longmemeval",
        subdir="longmemeval",
        filename="longmemeval_oracle.json",
        url="https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/main/longmemeval_oracle.json",
        sha256="65a8b2afea9ccb19bd9a1655c4c3e4d4de23aa19ccf94cff85b613d6b3380271",
        homepage="https://github.com/xiaowu0162/LongMemEval",
        licence="MIT",
    ),
}
ALIASES = {"locomo10": "locomo", "longmemeval-oracle": "longmemeval", "longmemeval_oracle": "longmemeval"}
SAMPLE_NAME = "sample"


def repo_root() -> Path:
    """The directory above the memtrace_opt package (the project checkout when run from source)."""
    return Path(__file__).resolve().parents[2]


def user_data_dir() -> Path:
    """Where fetched datasets live: $XDG_CACHE_HOME/memtrace-opt/data, else ~/.cache/memtrace-opt/data."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memtrace-opt" / "data"


def source_for(name: str) -> DatasetSource:
    """The DatasetSource for a name or alias; DatasetError listing the known names otherwise."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in SOURCES:
        raise DatasetError(f"unknown dataset {name!r}: known datasets are {', '.join(SOURCES)}")
    return SOURCES[key]


def candidate_paths(source: DatasetSource) -> list[Path]:
    """Where a named dataset is looked for, in order."""
    rel = Path(source.subdir) / source.filename
    paths = [repo_root().parent / "shared" / "data" / rel, Path.cwd().parent / "shared" / "data" / rel]
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        paths += [Path(env).expanduser() / rel, Path(env).expanduser() / source.filename]
    paths.append(user_data_dir() / rel)
    unique: list[Path] = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def resolve_data(spec: str) -> Path:
    """The file a data argument names: an existing path wins, then "sample", then a named dataset.

    Raises DatasetError saying how to get the file when nothing is found.
    """
    text = spec.strip()
    given = Path(text).expanduser()
    if given.is_file():
        return given
    if text.lower() == SAMPLE_NAME:
        return SAMPLE_PATH
    key = ALIASES.get(text.lower(), text.lower())
    if key not in SOURCES:
        raise DatasetError(
            f"{text}: no such file (a data argument is a path, or one of: {', '.join(SOURCES)}, {SAMPLE_NAME})"
        )
    source = SOURCES[key]
    for path in candidate_paths(source):
        if path.is_file():
            return path
    raise DatasetError(
        f"dataset {key!r} not found locally (looked for {source.subdir}/{source.filename} in ../shared/data, "
        f"${DATA_DIR_ENV} and {user_data_dir()}); get it with `memtrace data fetch {key}` or pass its path"
    )


def load_data(spec: str, data_slice: DataSlice | None = None) -> Dataset:
    """Resolve and load a "PATH[:SAMPLE_ID]" data argument with the gold answers `data_slice.gold` names (without
    a slice: the default, corrected; see `data.gold`), then apply `data_slice` if given. The dataset's
    `gold_revision` says which questions the revision changed."""
    path_text, sample_id = parse_data_spec(spec)
    path = resolve_data(path_text)
    key = ALIASES.get(path_text.lower(), path_text.lower())
    name = SAMPLE_NAME if path == SAMPLE_PATH else key if key in SOURCES else None
    dataset = revise_gold(load_dataset(path, name=name), data_slice.gold if data_slice is not None else DEFAULT_GOLD)
    if sample_id is not None:
        dataset = DataSlice(sample_ids=(sample_id,)).apply(dataset)
    if data_slice is not None:
        dataset = data_slice.apply(dataset)
    return dataset


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_dataset(
    name: str,
    dest: str | Path | None = None,
    *,
    url: str | None = None,
    timeout: float = 30.0,
    force: bool = False,
) -> Path:
    """Download a named dataset into `dest` (default: the user cache dir) and verify its sha256.

    Returns the file's path; a file already there with the right hash is kept unless `force`.
    Any network or hash failure raises a one-line DatasetError saying what to do instead.
    """
    source = source_for(name)
    folder = Path(dest).expanduser() if dest is not None else user_data_dir() / source.subdir
    target = folder / source.filename
    if target.is_file() and not force and sha256_of(target) == source.sha256:
        logger.info("%s already present at %s", source.name, target)
        return target
    link = url or source.url
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"cannot create {folder}: {exc.strerror or exc}") from None
    fd, tmp_name = tempfile.mkstemp(prefix=f".{source.filename}.", dir=folder)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            _download(link, out, digest, timeout, source)
        if digest.hexdigest() != source.sha256:
            raise DatasetError(
                f"downloaded {source.name} from {link} but its sha256 is {digest.hexdigest()}, "
                f"expected {source.sha256}; the upstream file changed or the download is damaged"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("fetched %s to %s", source.name, target)
    return target


def _download(link: str, out: BinaryIO, digest: hashlib._Hash, timeout: float, source: DatasetSource) -> None:
    request = urllib.request.Request(link, headers={"User-Agent": "memtrace-opt"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        http_error = isinstance(exc, urllib.error.HTTPError)
        reason = exc if http_error else getattr(exc, "reason", None) or exc
        raise DatasetError(
            f"could not download {source.name} from {link} ({reason}); without network access, "
            f"download it from {source.homepage} elsewhere and pass its path or set ${DATA_DIR_ENV}"
        ) from None
