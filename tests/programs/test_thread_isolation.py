"""One program object, two conversations in parallel threads: neither sees the other's memory."""

from __future__ import annotations

import threading

import dspy
import pytest
from memory_programs_kit import make_conversation, make_question

from memtrace_opt.programs import make_program
from memtrace_opt.testing import fake_lm
from memtrace_opt.testing.skills import default_skills


def _conversation(name, pet, city, sample_id):
    return make_conversation([
        ("9:00 am on 2 April, 2031", [(name, f"I adopted a puppy named {pet} from the rescue in {city}."),
                                      ("Friend", f"{pet} sounds lovely, the rescue in {city} is great.")]),
        ("9:00 am on 9 April, 2031", [(name, f"{pet} learned to fetch sticks in the {city} park this week.")]),
    ], [make_question(f"What is the name of {name}'s puppy?", pet, f"{sample_id}-q")], sample_id=sample_id)


@pytest.mark.parametrize("system", ["long_context", "rag", "mem0", "evermemos"])
def test_parallel_conversations_do_not_share_memory(system):
    program = make_program(system, {"embedder": "hash"})
    conversations = [_conversation("Alice", "Rex", "Oslo", "conv-a"), _conversation("Bruno", "Fido", "Lima", "conv-b")]
    results: dict[str, tuple] = {}
    barrier = threading.Barrier(2)
    lm = fake_lm(default_skills())

    def work(conversation):
        with dspy.context(lm=lm):
            barrier.wait()
            state = program.new_state(conversation)
            for session in conversation.sessions:  # interleave the two threads session by session
                program.memorize_session(session, state)
            program.finish_memorize(state)
            answer = program.respond(conversation.questions[0], state).answer
            results[conversation.sample_id] = (state, answer)

    threads = [threading.Thread(target=work, args=(c,)) for c in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for conversation, (own, other) in zip(conversations, [("Rex", "Fido"), ("Fido", "Rex")], strict=True):
        state, answer = results[conversation.sample_id]
        texts = " ".join(u.text for u in state.store.all_versions())
        assert own in texts and other not in texts
        assert answer == own
    assert results["conv-a"][0].store is not results["conv-b"][0].store
    assert not any(isinstance(v, list) and v for v in vars(program).values())  # nothing buffered on the module
