"""LoCoMo loader against the real locomo10.json and its known quirks."""

from __future__ import annotations

import re
from collections import Counter

from memtrace_opt.data import ABSTAIN_ANSWER, Dataset, clean_evidence, load_dataset

DIA_ID = re.compile(r"^D\d+:\d+$")


def question(dataset: Dataset, question_id: str):
    return next(q for _, q in dataset.questions() if q.question_id == question_id)


def test_counts_match_the_published_file(locomo: Dataset) -> None:
    stats = locomo.stats()
    assert (stats.conversations, stats.sessions, stats.turns, stats.questions) == (10, 272, 5882, 1986)
    assert stats.questions_by_category == {
        "single-hop": 841,
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 96,
        "adversarial": 446,
    }
    assert stats.abstention_questions == 446
    assert [c.sample_id for c in locomo.conversations][:3] == ["conv-26", "conv-30", "conv-41"]


def test_format_detection_gives_the_same_dataset(locomo: Dataset) -> None:
    detected = load_dataset(locomo.path)
    assert detected.name == "locomo"
    assert detected.stats() == locomo.stats()


def test_sessions_follow_session_keys_not_date_keys(locomo: Dataset) -> None:
    conv26 = locomo.conversation("conv-26")  # 35 session_N_date_time keys but 19 sessions
    assert [s.index for s in conv26.sessions] == list(range(1, 20))
    assert conv26.sessions[0].date_time == "1:56 pm on 8 May, 2023"
    assert conv26.speakers == ("Caroline", "Melanie")


def test_turn_ids_and_timestamps_follow_their_session(locomo: Dataset) -> None:
    for conversation in locomo.conversations:
        for session in conversation.sessions:
            for turn in session.turns:
                assert turn.dia_id.startswith(f"D{session.index}:")
                assert turn.session_index == session.index
                assert turn.timestamp == session.date_time
    assert locomo.conversation("conv-26").turn("D1:3").text.startswith("I went to a LGBTQ support group")


def test_integer_answers_become_strings(locomo: Dataset) -> None:
    assert all(isinstance(q.answer, str) for _, q in locomo.questions())
    assert question(locomo, "conv-26:q1").answer == "2022"
    assert question(locomo, "conv-26:q40").answer == "2"
    assert question(locomo, "conv-26:q75").answer == "3"


def test_adversarial_gold_is_abstention_and_the_trap_is_kept(locomo: Dataset) -> None:
    adversarial = [q for _, q in locomo.questions() if q.category_id == 5]
    assert len(adversarial) == 446
    assert all(
        q.abstention and q.answer == ABSTAIN_ANSWER and q.category == "adversarial" for q in adversarial
    )
    first = adversarial[0]
    assert first.question_id == "conv-26:q152"
    assert first.adversarial_answer == "self-care is important"
    assert not any(q.abstention for _, q in locomo.questions() if q.category_id != 5)


def test_malformed_evidence_ids_are_split_and_cleaned(locomo: Dataset) -> None:
    assert question(locomo, "conv-26:q37").evidence == ("D8:6", "D9:17")  # "D8:6; D9:17"
    assert "D11:26" in question(locomo, "conv-43:q18").evidence  # "D:11:26"
    assert question(locomo, "conv-49:q31").evidence == ("D9:1", "D4:4", "D4:6")  # space-separated
    assert question(locomo, "conv-50:q69").evidence == ("D30:5",)  # "D30:05"
    assert question(locomo, "conv-42:q88").evidence == ("D1:18", "D1:20")  # "D" dropped
    assert all(DIA_ID.match(e) for _, q in locomo.questions() for e in q.evidence)


def test_image_turns_keep_their_caption(locomo: Dataset) -> None:
    captioned = [t for c in locomo.conversations for t in c.turns() if t.image_caption]
    assert len(captioned) == 1226
    assert captioned[0].image_caption in captioned[0].display_text()
    assert "[shares an image:" in captioned[0].display_text()


def test_question_ids_are_unique_and_indexed(locomo: Dataset) -> None:
    ids = [q.question_id for _, q in locomo.questions()]
    assert len(ids) == len(set(ids))
    conv30 = locomo.conversation("conv-30")
    assert [q.question_id for q in conv30.questions[:2]] == ["conv-30:q0", "conv-30:q1"]
    assert Counter(q.category_id for _, q in locomo.questions())[1] == 282


def test_clean_evidence_unit_cases() -> None:
    assert clean_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert clean_evidence(["D:11:26", "D30:05", "D", ""]) == ("D11:26", "D30:5")
    assert clean_evidence(["D1:2", "D1:2,D1:3"]) == ("D1:2", "D1:3")
    assert clean_evidence([]) == ()
