"""A small conversation for the optimizer tests, written for the fake LM's instruction-sensitive skills
(`memtrace_opt.testing.skills`): half of its questions hang on facts with a date in them, which Mem0's fact
extraction drops when its instruction does not mention dates."""

from __future__ import annotations

from memtrace_opt.data import Conversation, Question, Session, Turn

SESSIONS = [
    ("1:00 pm on 13 March, 2034", [
        ("Alice", "I adopted a kitten yesterday, her name is Luna."),
        ("Bob", "Congratulations! I started working as a carpenter in Lisbon."),
        ("Alice", "I finished my first marathon last year in Rotterdam."),
        ("Bob", "My sister Clara studies marine biology in Porto."),
    ]),
    ("2:00 pm on 21 April, 2034", [
        ("Alice", "I visited the Louvre museum yesterday with my cousin."),
        ("Bob", "I bought a red sailboat called Marlin."),
        ("Alice", "I learned pottery from my grandmother Rosa."),
        ("Bob", "I moved to Porto last month to be near Clara."),
    ]),
]

QUESTIONS = [
    ("q-kitten-when", "When did Alice adopt a kitten?", "12 March 2034", ("D1:1",), "temporal"),
    ("q-kitten-name", "What is the name of Alice's kitten?", "Luna", ("D1:1",), "single-hop"),
    ("q-job", "What does Bob work as?", "carpenter", ("D1:2",), "single-hop"),
    ("q-marathon-when", "When did Alice finish her first marathon?", "2033", ("D1:3",), "temporal"),
    ("q-sister", "What does Bob's sister Clara study?", "marine biology", ("D1:4",), "single-hop"),
    ("q-louvre-when", "When did Alice visit the Louvre museum?", "20 April 2034", ("D2:1",), "temporal"),
    ("q-boat", "What is the name of Bob's sailboat?", "Marlin", ("D2:2",), "single-hop"),
    ("q-pottery", "Who taught Alice pottery?", "grandmother Rosa", ("D2:3",), "single-hop"),
    ("q-porto-when", "When did Bob move to Porto?", "March 2034", ("D2:4",), "temporal"),
]


def toy_conversation(sample_id: str = "toy-opt") -> Conversation:
    sessions = []
    for index, (date, lines) in enumerate(SESSIONS, start=1):
        turns = tuple(
            Turn(dia_id=f"D{index}:{n}", speaker=speaker, text=text, session_index=index, timestamp=date)
            for n, (speaker, text) in enumerate(lines, start=1)
        )
        sessions.append(Session(index=index, date_time=date, turns=turns))
    questions = tuple(
        Question(question_id=f"{sample_id}:{qid}", question=text, answer=answer, category=category,
                 category_id=2 if category == "temporal" else 4, evidence=evidence)
        for qid, text, answer, evidence, category in QUESTIONS
    )
    return Conversation(sample_id, ("Alice", "Bob"), tuple(sessions), questions, "toy")


def write_locomo(path, sample_ids=("toy-a", "toy-b")) -> None:
    """The toy conversation in LoCoMo's file format, once per sample id (question ids become `<id>:q<i>`), each
    session closed by a turn naming the sample id: the same sessions in two conversations would make them one unit
    of the splits (they would share evidence)."""
    import json

    category_ids = {"temporal": 2, "single-hop": 4}
    records = []
    for sample_id in sample_ids:
        conversation = {"speaker_a": "Alice", "speaker_b": "Bob"}
        for index, (date, lines) in enumerate(SESSIONS, start=1):
            conversation[f"session_{index}_date_time"] = date
            conversation[f"session_{index}"] = [
                {"speaker": speaker, "dia_id": f"D{index}:{n}", "text": text}
                for n, (speaker, text) in enumerate([*lines, ("Bob", f"({sample_id})")], start=1)
            ]
        qa = [{"question": text, "answer": answer, "evidence": list(evidence), "category": category_ids[category]}
              for _, text, answer, evidence, category in QUESTIONS]
        records.append({"sample_id": sample_id, "conversation": conversation, "qa": qa})
    path.write_text(json.dumps(records), encoding="utf-8")
