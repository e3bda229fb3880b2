"""Resolving data arguments to files, and fetching datasets (offline: local URLs only)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from memtrace_opt.cli import main
from memtrace_opt.data import SAMPLE_PATH, SOURCES, DatasetSource, fetch_dataset, load_data, resolve_data
from memtrace_opt.data import resolve as resolve_module
from memtrace_opt.errors import ConfigError, DatasetError

UNREACHABLE = "http://127.0.0.1:9/locomo10.json"  # the discard port: refused at once, no network used


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No repo data, an empty cwd, no $MEMTRACE_DATA_DIR, an empty user cache."""
    home = tmp_path / "nowhere"
    (home / "cwd").mkdir(parents=True)
    monkeypatch.setattr(resolve_module, "repo_root", lambda: home / "repo")
    monkeypatch.chdir(home / "cwd")
    monkeypatch.delenv("MEMTRACE_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))
    return home


def test_sample_and_an_existing_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_data("sample") == SAMPLE_PATH
    assert resolve_data(str(SAMPLE_PATH)) == SAMPLE_PATH
    monkeypatch.chdir(tmp_path)
    Path("locomo").write_bytes(SAMPLE_PATH.read_bytes())
    assert resolve_data("locomo") == Path("locomo")  # a given existing file wins over the name


def test_names_resolve_to_the_shared_data(locomo_path: Path, longmemeval_path: Path) -> None:
    assert resolve_data("locomo").resolve() == locomo_path.resolve()
    assert resolve_data("LongMemEval").resolve() == longmemeval_path.resolve()
    assert resolve_data("longmemeval-oracle").resolve() == longmemeval_path.resolve()


def test_missing_named_dataset_says_how_to_get_it(nowhere: Path) -> None:
    with pytest.raises(DatasetError) as info:
        resolve_data("locomo")
    message = str(info.value)
    assert "memtrace data fetch locomo" in message and "\n" not in message
    with pytest.raises(DatasetError, match="no such file"):
        resolve_data("not-a-dataset.json")


def test_env_dir_and_user_cache(nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = nowhere / "cache" / "memtrace-opt" / "data" / "locomo" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(SAMPLE_PATH.read_bytes())
    assert resolve_data("locomo") == cached
    env_file = nowhere / "env" / "locomo" / "locomo10.json"
    env_file.parent.mkdir(parents=True)
    env_file.write_bytes(SAMPLE_PATH.read_bytes())
    monkeypatch.setenv("MEMTRACE_DATA_DIR", str(nowhere / "env"))
    assert resolve_data("locomo") == env_file  # $MEMTRACE_DATA_DIR comes before the cache


def test_load_data_with_sample_id() -> None:
    dataset = load_data("sample:sample-1")
    assert dataset.name == "sample" and len(dataset.conversations) == 1
    with pytest.raises(ConfigError, match="no conversation 'nope'"):
        load_data("sample:nope")


def test_fetch_fails_fast_and_clearly_offline(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(DatasetError) as info:
        fetch_dataset("locomo", tmp_path / "dest", url=UNREACHABLE, timeout=5)
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert message.startswith(f"could not download locomo from {UNREACHABLE} (")
    assert "\n" not in message and "github.com/snap-research/locomo" in message
    assert list((tmp_path / "dest").iterdir()) == []  # no partial file left behind


def test_fetch_rejects_a_wrong_hash(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="sha256 is .* expected 79fa87e9"):
        fetch_dataset("locomo", tmp_path, url=SAMPLE_PATH.as_uri())
    assert list(tmp_path.iterdir()) == []


def test_fetch_downloads_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hashlib.sha256(SAMPLE_PATH.read_bytes()).hexdigest()
    source = DatasetSource(
        "tiny", "tiny", "tiny.json", SAMPLE_PATH.as_uri(), digest, "https://example.org", "MIT"
    )
    monkeypatch.setitem(SOURCES, "tiny", source)
    target = fetch_dataset("tiny", tmp_path)
    assert target == tmp_path / "tiny.json" and target.read_bytes() == SAMPLE_PATH.read_bytes()
    # A verified copy is kept without touching the network.
    assert fetch_dataset("tiny", tmp_path, url=UNREACHABLE) == target


def test_fetch_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown dataset 'nope': known datasets are locomo, longmemeval"):
        fetch_dataset("nope", tmp_path)


def test_known_sources_are_pinned() -> None:
    assert SOURCES["locomo"].sha256 == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
    assert SOURCES["locomo"].url.endswith("snap-research/locomo/main/data/locomo10.json")
    assert SOURCES["longmemeval"].filename == "longmemeval_oracle.json"


def test_local_copies_match_the_pinned_hashes(locomo_path: Path, longmemeval_path: Path) -> None:
    assert resolve_module.sha256_of(locomo_path) == SOURCES["locomo"].sha256
    assert resolve_module.sha256_of(longmemeval_path) == SOURCES["longmemeval"].sha256


def test_cli_fetch_offline_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["data", "fetch", "locomo", "--dest", str(tmp_path), "--url", UNREACHABLE, "--timeout", "5"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: could not download locomo")
