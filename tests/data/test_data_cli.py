"""`memtrace data stats`."""

from __future__ import annotations

import json
import re

import pytest

from memtrace_opt.cli import main
from memtrace_opt.cli.data_cmd import dataset_stats, stats_payload
from memtrace_opt.data import CORRECTIONS_FILE
from tests.conftest import shared_data_path


def test_stats_json_for_the_sample(capsys: pytest.CaptureFixture[str]) -> None:
    main(["data", "stats", "sample", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["name"] == "sample"
    assert (payload["conversations"], payload["sessions"], payload["turns"], payload["questions"]) == (
        1,
        3,
        26,
        13,
    )
    assert payload["questions_by_category"]["adversarial"] == 2
    assert payload["gold"]["gold"] == "corrected" and payload["gold"]["corrections"] is None


def test_stats_table(capsys: pytest.CaptureFixture[str]) -> None:
    main(["data", "stats", "sample"])
    out = capsys.readouterr().out
    for word in ("conversations", "sessions", "turns", "questions", "multi-hop", "adversarial", "26"):
        assert word in out


def test_stats_for_locomo(locomo_path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["data", "stats", str(locomo_path), "--json", "--gold", "upstream"])
    payload = json.loads(capsys.readouterr().out)
    assert (payload["conversations"], payload["sessions"], payload["turns"], payload["questions"]) == (
        10,
        272,
        5882,
        1986,
    )
    assert payload["gold"]["gold"] == "upstream" and payload["gold"]["changed"] == {"qa_corrections": 0,
                                                                                   "glued_words": 0, "glued_pairs": 0}


def test_stats_count_what_the_corrected_gold_changed(locomo_path, capsys: pytest.CaptureFixture[str]) -> None:
    shared_data_path("locomo", CORRECTIONS_FILE)
    main(["data", "stats", str(locomo_path), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["questions"] == 1985  # the corrections remove one question
    assert payload["gold"] == {"gold": "corrected", "corrections": CORRECTIONS_FILE,
                               "changed": {"qa_corrections": 219, "glued_words": 33, "glued_pairs": 5},
                               "removed": 1}
    main(["data", "stats", str(locomo_path)])
    table = capsys.readouterr().out
    assert "gold: corrected" in table and "changed by glued words" in table
    assert re.search(r"changed by glued pairs\W+5\b", table)


def test_stats_function_with_a_sample_id(locomo_path) -> None:
    dataset, stats = dataset_stats(f"{locomo_path}:conv-30")
    assert [c.sample_id for c in dataset.conversations] == ["conv-30"]
    assert stats.questions == 105 and stats.sessions == 19
    assert stats_payload(dataset, stats)["questions"] == 105


def test_unknown_name_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["data", "stats", "no-such-data.json"])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("error: no-such-data.json: no such file")
