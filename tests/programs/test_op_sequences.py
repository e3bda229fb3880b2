"""The exact order of operations each system runs on a small conversation (fake LM, hash embedder)."""

from __future__ import annotations

from memtrace_opt.programs import make_program

LC_WRITE = ["long_context.ingest", "long_context.trim"] * 2
RAG_WRITE = ["rag.chunk", "rag.index_chunk", "rag.index_chunk",
             "rag.chunk", "rag.index_chunk", "rag.index_chunk", "rag.index_chunk",
             "rag.chunk", "rag.index_chunk"]
MEM0_WINDOW = ["mem0.extract_facts", "mem0.search_similar", "mem0.update_decision", "mem0.apply"]
EVERMEMOS_CLOSE = ["evermemos.finalize_memcell", "evermemos.extract_episode", "evermemos.extract_event_log",
                   "evermemos.store_episode", "evermemos.store_events"]


def _run(system, settings, conversation, recorder):
    program = make_program(system, {"embedder": "hash", **settings})
    state = program.new_state(conversation)
    program.memorize(conversation, state)
    write = list(recorder.names)
    write_calls = list(recorder.calls)
    reads = []
    for question in conversation.questions:
        recorder.clear()
        answer = program.respond(question, state).answer
        reads.append((answer, list(recorder.names)))
    return write_calls, state, write, reads


def test_long_context_sequence(tiny, fake, recorder):
    _, _, write, reads = _run("long_context", {}, tiny, recorder)
    assert write == LC_WRITE
    assert [names for _, names in reads] == [["long_context.retrieve", "long_context.answer"]] * 2
    assert reads[0][0] == "Pepper"


def test_rag_sequence_one_turn_per_chunk(tiny, fake, recorder):
    # 32 tokens hold one turn with its date header but never two: a chunk per turn, the last one on flush
    _, state, write, reads = _run("rag", {"chunk_tokens": 32}, tiny, recorder)
    assert write == RAG_WRITE
    assert [u.source_turns for u in state.store.active()] == [(f"D{s}:{t}",) for s in (1, 2) for t in (1, 2, 3)]
    assert [names for _, names in reads] == [["rag.retrieve", "rag.answer"]] * 2


def test_mem0_sequence_one_window_per_session(tiny, fake, recorder):
    calls, _, write, reads = _run("mem0", {"window_turns": 3}, tiny, recorder)
    assert write == MEM0_WINDOW * 2
    # the first window has nothing to compare with: the decision adds every fact without an LM call
    decisions = [c.outputs for c in calls if c.op_name == "mem0.update_decision"]
    assert [d.lm_skipped for d in decisions] == [True, False]
    assert {a["event"] for a in decisions[0].memory_actions} == {"ADD"}
    assert [names for _, names in reads] == [["mem0.retrieve", "mem0.answer"]] * 2
    assert fake.counts["update_decision"] == 1 and fake.counts["extract_facts"] == 2


def test_evermemos_sequence_with_second_round(tiny, fake, recorder):
    _, state, write, reads = _run("evermemos", {"check_every": 1}, tiny, recorder)
    assert write == (
        ["evermemos.detect_boundary"] * 3 + EVERMEMOS_CLOSE + ["evermemos.detect_boundary"] * 2 + EVERMEMOS_CLOSE
    )
    (found, first), (missing, second) = reads
    assert found == "Pepper"
    assert first == ["evermemos.retrieve", "evermemos.check_sufficiency", "evermemos.answer"]
    assert second == ["evermemos.retrieve", "evermemos.check_sufficiency", "evermemos.generate_queries",
                      "evermemos.retrieve", "evermemos.merge", "evermemos.answer"]
    assert missing == "Not mentioned in the conversation"
    kinds = [u.kind for u in state.store.active()]
    assert kinds.count("memcell") == 2 and kinds.count("episode") == 2 and kinds.count("event") == 6
