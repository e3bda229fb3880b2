"""Write-path rules: Long-Context trims the oldest past its budget, RAG chunks respect the token budget and
carry dates and speakers, EverMemOS hard limits (messages, tokens, a new session) force boundaries."""

from __future__ import annotations

from memory_programs_kit import make_conversation

from memtrace_opt.programs import make_program
from memtrace_opt.programs.common import estimate_tokens
from memtrace_opt.programs.evermemos import EverMemOSConfig, forced_boundary
from memtrace_opt.programs.long_context import transcript_tokens


def _memorize(system, settings, conversation):
    program = make_program(system, {"embedder": "hash", **settings})
    state = program.new_state(conversation)
    program.memorize(conversation, state)
    return state


def _numbered_conversation(n_sessions=3, turns=6, words=12):
    sessions = []
    for s in range(1, n_sessions + 1):
        sessions.append((f"10:00 am on {s} March, 2023", [
            ("Ann" if t % 2 else "Ben", f"session {s} message {t} " + " ".join(f"word{s}{t}{w}" for w in range(words)))
            for t in range(1, turns + 1)]))
    return make_conversation(sessions)


# Long-Context -------------------------------------------------------------------------------------------
def test_long_context_trim_drops_the_oldest_past_the_budget(fake, recorder):
    conversation = _numbered_conversation()
    state = _memorize("long_context", {"context_tokens": 300}, conversation)
    live = state.store.active()
    assert transcript_tokens(live) <= 300
    all_ids = [t.dia_id for t in conversation.turns()]
    kept_ids = [u.source_turns[0] for u in live]
    assert kept_ids == all_ids[len(all_ids) - len(kept_ids):]  # a suffix: the newest turns survive
    assert 0 < len(kept_ids) < len(all_ids)
    dropped = [u for u in state.store.all_versions() if u.deleted]
    assert [u.source_turns[0] for u in dropped] == all_ids[: len(all_ids) - len(kept_ids)]
    # one more turn would not have fitted: the trim keeps as much as the budget allows
    first_dropped = state.store.history(dropped[-1].unit_id)[0]
    assert transcript_tokens([first_dropped, *live]) > 300
    trims = recorder.of("long_context.trim")
    assert len(trims) == 3 and sum(len(c.outputs.dropped) for c in trims) == len(dropped)


def test_long_context_keeps_everything_under_the_budget(fake):
    state = _memorize("long_context", {}, _numbered_conversation())
    assert len(state.store.active()) == 18 and not any(u.deleted for u in state.store.all_versions())


# RAG ----------------------------------------------------------------------------------------------------
def test_rag_chunks_respect_the_budget_and_carry_dates_and_speakers(fake, recorder):
    conversation = _numbered_conversation(turns=5)  # 3 turns fit a chunk, 5 per session: chunks span sessions
    state = _memorize("rag", {"chunk_tokens": 120}, conversation)
    chunks = state.store.active()
    assert len(chunks) > 3
    for chunk in chunks:
        assert estimate_tokens(chunk.text) <= 120
        assert chunk.text.startswith("[") and "March 2023]" in chunk.text.splitlines()[0]
        assert "Ann: " in chunk.text or "Ben: " in chunk.text
    covered = [dia for chunk in chunks for dia in chunk.source_turns]
    assert covered == [t.dia_id for t in conversation.turns()]  # every turn once, in order
    # a chunk that spans two sessions shows both dates
    spanning = [c for c in chunks if len({d.split(":")[0] for d in c.source_turns}) > 1]
    assert spanning and all(c.text.count("March 2023]") == 2 for c in spanning)
    assert recorder.names[-2:] == ["rag.chunk", "rag.index_chunk"]  # the end-of-conversation flush


def test_rag_splits_a_turn_longer_than_a_chunk(fake):
    long_text = " ".join(f"token{i}" for i in range(400))
    conversation = make_conversation([("1:00 pm on 5 May, 2023", [("Ann", "short hello there friend"),
                                                                  ("Ben", long_text)])])
    chunks = _memorize("rag", {"chunk_tokens": 64}, conversation).store.active()
    assert all(estimate_tokens(c.text) <= 64 for c in chunks)
    pieces = [c for c in chunks if "D1:2" in c.source_turns]
    assert len(pieces) > 5
    rebuilt = " ".join(line.removeprefix("Ben: ") for c in pieces for line in c.text.splitlines() if line.startswith("Ben: "))
    assert rebuilt == long_text


# EverMemOS ----------------------------------------------------------------------------------------------
def test_evermemos_message_limit_forces_boundaries_with_one_message_overlap(fake, recorder):
    conversation = _numbered_conversation(n_sessions=1, turns=7, words=3)
    state = _memorize("evermemos", {"max_memcell_messages": 3, "check_every": 100}, conversation)
    memcells = [u for u in state.store.active() if u.kind == "memcell"]
    assert [u.source_turns for u in memcells] == [
        ("D1:1", "D1:2", "D1:3"), ("D1:3", "D1:4", "D1:5"), ("D1:5", "D1:6", "D1:7")]
    boundaries = recorder.of("evermemos.detect_boundary")
    assert [c.outputs.forced for c in boundaries] == ["message limit (3)"] * 2
    assert fake.counts["detect_boundary"] == 0  # forced boundaries never ask the LM


def test_evermemos_token_limit_and_new_session_force_boundaries(fake, recorder):
    conversation = _numbered_conversation(n_sessions=2, turns=4, words=20)
    state = _memorize("evermemos", {"max_memcell_tokens": 200, "check_every": 100}, conversation)
    memcells = [u for u in state.store.active() if u.kind == "memcell"]
    assert all(estimate_tokens(u.text) <= 200 for u in memcells)
    reasons = [c.outputs.forced for c in recorder.of("evermemos.detect_boundary")]
    assert "new session" in reasons and "token limit (200)" in reasons
    # no MemCell spans two sessions, and episodes and events point back to their MemCell
    assert all(len({d.split(":")[0] for d in u.source_turns}) == 1 for u in memcells)
    ids = {u.unit_id for u in memcells}
    derived = [u for u in state.store.active() if u.kind in ("episode", "event")]
    assert derived and all(u.metadata["memcell_id"] in ids for u in derived)
    assert all(u.source_turns == state.store.get(u.metadata["memcell_id"]).source_turns for u in derived)
    assert fake.counts["detect_boundary"] == 0


def test_forced_boundary_rules():
    cfg = EverMemOSConfig(max_memcell_messages=2, max_memcell_tokens=10_000)
    conversation = _numbered_conversation(n_sessions=2, turns=2, words=1)
    s1, s2 = conversation.sessions
    assert forced_boundary([], list(s1.turns), cfg) is None
    assert forced_boundary([s1.turns[0]], [s1.turns[1]], cfg) is None
    assert forced_boundary(list(s1.turns), [s2.turns[0]], cfg) == "new session"
    same = EverMemOSConfig(max_memcell_messages=2, split_on_new_session=False)
    assert forced_boundary(list(s1.turns), [s2.turns[0]], same) == "message limit (2)"


def test_evermemos_lm_boundary_splits_an_episode(fake, recorder):
    conversation = make_conversation([("10:00 am on 1 May, 2023", [
        ("Ann", "My garden tomatoes finally ripened and the basil grows fast."),
        ("Ben", "Fresh garden tomatoes with basil sound delicious for summer."),
        ("Ann", "Anyway, did you finish the quarterly budget spreadsheet for accounting?"),
        ("Ben", "The accounting budget spreadsheet needs one more review from finance."),
    ])])
    state = _memorize("evermemos", {"check_every": 2}, conversation)
    memcells = [u.source_turns for u in state.store.active() if u.kind == "memcell"]
    assert memcells == [("D1:1", "D1:2"), ("D1:3", "D1:4")]
    assert fake.counts["detect_boundary"] == 1
