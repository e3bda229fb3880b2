"""A run records the gold answers it read: `data.gold` in config.yaml (and an optimization's manifest, per split)."""

from __future__ import annotations

import json
from pathlib import Path

from memtrace_opt.data import DataSlice, load_data
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.optimizers.evaluation.splits import make_splits
from memtrace_opt.optimizers.optimize import _gold_by_split
from memtrace_opt.rundir import RunDir
from memtrace_opt.runner import RunRequest, run_system

FAKE = ModelRoles(task=ModelSpec(model="fake"))


def _conversation(sample_id: str, glued: bool = True) -> dict:
    turns = [{"speaker": "Ines", "dia_id": "D1:1", "text": "On weekends I like sketching herons by the canal."},
             {"speaker": "Tomas", "dia_id": "D1:2", "text": "I pinned the map to a cork board."},
             {"speaker": "Ines", "dia_id": "D1:3", "text": f"({sample_id})"}]  # the same session twice: one unit
    qa = [{"question": "What does Ines like doing?", "answer": "sketchingherons" if glued else "herons", "evidence": ["D1:1"], "category": 4},
          {"question": "Where is the map?", "answer": "on a cork board", "evidence": ["D1:2"], "category": 4}]
    return {"sample_id": sample_id, "qa": qa, "conversation": {
        "speaker_a": "Ines", "speaker_b": "Tomas", "session_1_date_time": "1:00 pm on 6 March, 2022", "session_1": turns}}


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "glued.json"
    path.write_text(json.dumps([_conversation("demo-1"), _conversation("demo-2"), _conversation("demo-3", glued=False)]), encoding="utf-8")
    return path


def test_a_run_records_what_the_gold_revision_changed(tmp_path: Path) -> None:
    data = _data(tmp_path)
    request = RunRequest(system="long_context", data=str(data), out=tmp_path / "run", roles=FAKE, judge=False,
                         data_slice=DataSlice(sample_ids=("demo-1",)), program_settings={"embedder": "hash"})
    run = RunDir(run_system(request, progress=False).run_dir)
    recorded = run.read_config()["data"]
    assert recorded["slice"]["gold"] == "corrected"
    assert recorded["gold"] == {"gold": "corrected", "corrections": None,
                                "changed": {"qa_corrections": 0, "glued_words": 1, "glued_pairs": 0}}
    assert {c.question_id: c.gold for c in run.read_cases()}["demo-1:q0"] == "sketching herons"

    upstream = RunRequest(system="long_context", data=str(data), out=tmp_path / "up", roles=FAKE, judge=False,
                          data_slice=DataSlice(sample_ids=("demo-1",), gold="upstream"),
                          program_settings={"embedder": "hash"})
    run = RunDir(run_system(upstream, progress=False).run_dir)
    assert run.read_config()["data"]["gold"]["changed"] == {"qa_corrections": 0, "glued_words": 0, "glued_pairs": 0}
    assert {c.question_id: c.gold for c in run.read_cases()}["demo-1:q0"] == "sketchingherons"


def test_an_optimization_records_the_changes_per_split(tmp_path: Path) -> None:
    dataset = load_data(str(_data(tmp_path)))
    splits = make_splits(dataset, train="demo-1", val="demo-3", test="demo-2")
    assert _gold_by_split(dataset, splits) == {
        "gold": "corrected", "corrections": None, "train": {"qa_corrections": 0, "glued_words": 1, "glued_pairs": 0},
        "val": {"qa_corrections": 0, "glued_words": 0, "glued_pairs": 0}, "test": {"qa_corrections": 0, "glued_words": 1, "glued_pairs": 0}}
