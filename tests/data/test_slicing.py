"""DataSlice and the data-argument parsers."""

from __future__ import annotations

import pytest

from memtrace_opt.data import Dataset, DataSlice, load_sample, parse_data_spec, parse_sessions
from memtrace_opt.errors import ConfigError


def ids(dataset: Dataset) -> list[str]:
    return [q.question_id for _, q in dataset.questions()]


def test_parse_data_spec() -> None:
    assert parse_data_spec("locomo") == ("locomo", None)
    assert parse_data_spec("locomo:conv-26") == ("locomo", "conv-26")
    assert parse_data_spec("data/my file.json:conv-30") == ("data/my file.json", "conv-30")
    assert parse_data_spec("C:\\data\\x.json") == ("C:\\data\\x.json", None)
    spec = parse_data_spec("sample:sample-1")
    assert (spec.path, spec.sample_id) == ("sample", "sample-1")
    for bad in ("", "  ", "locomo:", ":conv-26"):
        with pytest.raises(ConfigError):
            parse_data_spec(bad)


def test_parse_data_spec_prefers_an_existing_path(tmp_path) -> None:
    odd = tmp_path / "odd:name.json"
    odd.write_text("[]")
    assert parse_data_spec(str(odd)) == (str(odd), None)


def test_parse_sessions() -> None:
    assert parse_sessions("1-3") == (1, 3)
    assert parse_sessions(" 2 - 4 ") == (2, 4)
    assert parse_sessions("2") == (2, 2)
    for bad in ("", "0-2", "3-1", "a-b", "1-", "1,3"):
        with pytest.raises(ConfigError, match="session range"):
            parse_sessions(bad)


def test_session_range_keeps_only_questions_with_all_evidence_inside() -> None:
    sample = load_sample()
    early = DataSlice(sessions=(1, 2)).apply(sample)
    assert [s.index for s in early.conversations[0].sessions] == [1, 2]
    # q6 (D1:3 + D3:2), q7, q8 and q9 have evidence in session 3 and go.
    assert ids(early) == ["sample-1:q0", "sample-1:q1", "sample-1:q2", "sample-1:q3", "sample-1:q11"]
    late = DataSlice(sessions=(3, 3)).apply(sample)
    assert [s.index for s in late.conversations[0].sessions] == [3]
    assert ids(late) == ["sample-1:q4", "sample-1:q5", "sample-1:q10", "sample-1:q12"]
    assert late.conversations[0].turns().__next__().dia_id == "D3:1"


def test_questions_without_evidence_need_no_session_range(write_json, make_locomo_record) -> None:
    record = make_locomo_record()
    record["qa"].append({"question": "Anything?", "answer": "no", "evidence": [], "category": 4})
    from memtrace_opt.data import load_dataset

    dataset = load_dataset(write_json("x.json", [record]))
    assert len(DataSlice().apply(dataset).conversations[0].questions) == 2
    assert ids(DataSlice(sessions=(1, 2)).apply(dataset)) == ["conv-x:q0"]


def test_categories_by_name_or_locomo_number() -> None:
    sample = load_sample()
    assert len(ids(DataSlice(categories=("temporal",)).apply(sample))) == 3
    assert ids(DataSlice(categories=("1",)).apply(sample)) == ["sample-1:q6", "sample-1:q8"]
    assert ids(DataSlice(categories=("Multi_Hop",)).apply(sample)) == ["sample-1:q6", "sample-1:q8"]
    assert DataSlice(categories=("no-such",)).apply(sample).conversations == ()


def test_limit_takes_the_first_questions_in_file_order(locomo: Dataset) -> None:
    sliced = DataSlice(limit=250).apply(locomo)
    assert [c.sample_id for c in sliced.conversations] == ["conv-26", "conv-30"]
    assert len(sliced.conversations[0].questions) == 199
    assert ids(sliced)[-1] == "conv-30:q50"
    assert ids(DataSlice(limit=250).apply(locomo)) == ids(sliced)
    assert len(sliced.conversations[1].sessions) == 19  # sessions are untouched by a limit


def test_seeded_limit_is_a_reproducible_sample_in_file_order(locomo: Dataset) -> None:
    drawn = ids(DataSlice(limit=40, seed=7).apply(locomo))
    assert len(drawn) == 40
    assert drawn == ids(DataSlice(limit=40, seed=7).apply(locomo))
    assert drawn != ids(DataSlice(limit=40).apply(locomo))
    order = {qid: i for i, qid in enumerate(ids(locomo))}
    assert drawn == sorted(drawn, key=order.__getitem__)


def test_sample_ids_and_unknown_sample() -> None:
    sample = load_sample()
    assert len(DataSlice(sample_ids=("sample-1",)).apply(sample).conversations) == 1
    with pytest.raises(ConfigError, match="no conversation 'conv-99'"):
        DataSlice(sample_ids=("conv-99",)).apply(sample)


def test_slices_do_not_change_the_input_and_combine() -> None:
    sample = load_sample()
    before = sample.stats()
    sliced = DataSlice(sessions=(1, 2), categories=("single-hop",), limit=2).apply(sample)
    assert ids(sliced) == ["sample-1:q0", "sample-1:q1"]
    assert sample.stats() == before


def test_invalid_slices_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        DataSlice(sessions=(3, 1))
    with pytest.raises(ConfigError):
        DataSlice(limit=0)


def test_describe_and_round_trip() -> None:
    assert DataSlice().describe() == "all"
    data_slice = DataSlice(
        sample_ids=("conv-26",), sessions=(1, 3), categories=("temporal", "multi-hop"), limit=20, seed=3
    )
    assert (
        data_slice.describe() == "samples=conv-26 sessions=1-3 categories=temporal,multi-hop limit=20 seed=3"
    )
    assert DataSlice.from_dict(data_slice.to_dict()) == data_slice
    assert DataSlice.from_dict({"sessions": "2-4"}).sessions == (2, 4)
