"""The packaged sample conversation: shape, evidence integrity, and the facts the core tests rely on."""

from __future__ import annotations

import json

from memtrace_opt.data import SAMPLE_PATH, Question, Turn, load_sample


def test_sample_shape() -> None:
    dataset = load_sample()
    assert dataset.name == "sample"
    stats = dataset.stats()
    assert (stats.conversations, stats.sessions, stats.turns, stats.questions) == (1, 3, 26, 13)
    assert set(stats.questions_by_category) == {
        "single-hop",
        "multi-hop",
        "temporal",
        "open-domain",
        "adversarial",
    }
    (conversation,) = dataset.conversations
    assert conversation.sample_id == "sample-1" and conversation.speakers == ("Maya", "Theo")
    assert all(6 <= len(s.turns) <= 10 for s in conversation.sessions)
    assert [s.date_time for s in conversation.sessions] == [
        "10:15 am on 3 March, 2023",
        "7:40 pm on 21 April, 2023",
        "2:05 pm on 9 July, 2023",
    ]


def test_every_evidence_id_names_a_turn() -> None:
    (conversation,) = load_sample().conversations
    for q in conversation.questions:
        assert q.evidence, q.question_id
        assert all(conversation.has_turn(e) for e in q.evidence), q.question_id


def test_sample_carries_an_update_and_a_retraction() -> None:
    (conversation,) = load_sample().conversations
    assert "Boston" in conversation.turn("D1:3").text  # where Maya lives first
    assert "moved to Denver" in conversation.turn("D3:2").text  # ... updated in session 3
    assert "trip to Japan" in conversation.turn("D1:8").text  # a plan
    assert "cancelled the Japan trip" in conversation.turn("D3:5").text  # ... later retracted
    by_text = {q.question: q for q in conversation.questions}
    assert by_text["Which city does Maya live in now?"].answer == "Denver"
    assert by_text["Which cities has Maya lived in?"].evidence == ("D1:3", "D3:2")


def test_sample_adversarial_questions() -> None:
    (conversation,) = load_sample().conversations
    adversarial = [q for q in conversation.questions if q.category == "adversarial"]
    assert len(adversarial) == 2
    assert all(q.abstention and q.adversarial_answer for q in adversarial)
    assert adversarial[0].adversarial_answer == "Biscuit"


def test_sample_file_is_package_data() -> None:
    assert SAMPLE_PATH.parent.name == "sample" and SAMPLE_PATH.suffix == ".json"
    raw = json.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
    assert isinstance(raw, list) and raw[0]["sample_id"] == "sample-1"


def test_question_and_turn_round_trip_through_json() -> None:
    (conversation,) = load_sample().conversations
    for q in conversation.questions:
        assert Question.from_dict(json.loads(json.dumps(q.to_dict()))) == q
    for turn in conversation.turns():
        assert Turn.from_dict(json.loads(json.dumps(turn.to_dict()))) == turn
    captioned = Turn("D1:1", "Ann", "look", 1, None, image_caption="a dog on a beach")
    assert Turn.from_dict(captioned.to_dict()) == captioned
