"""A --config file that cannot be read as a YAML mapping is bad input: one line on stderr naming the file, exit 2,
no traceback (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrace_opt.cli import run_cli
from memtrace_opt.config import load_config
from memtrace_opt.errors import ConfigError

BAD_FILES = {
    "binary": (bytes(range(256)) * 2, "is not UTF-8 text (byte 0x80 at offset 128)"),
    "utf16": ("system: rag\n".encode("utf-16"), "is not UTF-8 text (byte 0xff at offset 0)"),
    "nul": (b"system: r\x00ag\n", "is not valid YAML: special characters are not allowed (character #x0000"),
    "unclosed": (b"system: [rag\n", "is not valid YAML: line 2, column 1: expected ',' or ']'"),
    "indent": (b"system: rag\n  extra: 1\n", "is not valid YAML: line 2, column 8: mapping values are not allowed"),
    "list": (b"- system\n- rag\n", ": expected a mapping at the top level, got list"),
    "scalar": (b"rag\n", ": expected a mapping at the top level, got str"),
}


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_config_file_that_is_not_a_yaml_mapping_is_one_line_and_exit_2(name, tmp_path, capsys):
    content, message = BAD_FILES[name]
    config = tmp_path / f"{name}.yaml"
    config.write_bytes(content)
    assert run_cli(["run", "--system", "rag", "--lm", "fake", "--config", str(config)]) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"error: config file {config}"), name
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_an_unreadable_config_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    config = tmp_path / "locked.yaml"
    config.write_text("system: rag\n", encoding="utf-8")
    real_read = Path.read_text

    def refuse(self: Path, *args, **kwargs) -> str:
        if self == config:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", refuse)
    assert run_cli(["run", "--system", "rag", "--lm", "fake", "--config", str(config)]) == 2
    assert _one_line(capsys.readouterr().err) == f"error: cannot read config file {config}: Permission denied"


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_missing_config_file_or_a_directory_is_one_line_and_exit_2(make, tmp_path, capsys):
    config = tmp_path / "config.yaml"
    if make == "directory":
        config.mkdir()
    assert run_cli(["run", "--system", "rag", "--lm", "fake", "--config", str(config)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: ") and ("config.yaml" in line), line


def test_a_utf8_file_with_a_byte_order_mark_still_reads(tmp_path):
    config = tmp_path / "bom.yaml"
    config.write_bytes("\ufeffsystem: rag\nlimit: 3\n".encode())
    assert load_config(config) == {"system": "rag", "limit": 3}
