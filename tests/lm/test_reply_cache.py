"""The reply cache: a reply kept by what the model was sent, served without a model call, layered and persistent."""

from __future__ import annotations

import sqlite3
import time

import dspy

from memtrace_opt.lm import ModelRoles, Models
from memtrace_opt.lm.reply_cache import CachedReply, ReplyCache, request_key
from memtrace_opt.lm.roles import ModelSpec
from memtrace_opt.optimizers.core.budget import LMBudget
from memtrace_opt.tracing import LMCallEvent, trace_conversation


class Ask(dspy.Signature):
    """Answer in one word."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def fake_models(cache: ReplyCache | None) -> Models:
    models = Models(ModelRoles(task=ModelSpec("fake")))
    models.use_replies(cache)
    return models


def ask(models: Models, question: str) -> str:
    with dspy.context(lm=models.task):
        return str(dspy.Predict(Ask)(question=question).answer)


def test_the_same_request_is_served_once_paid_and_counted_apart():
    models = fake_models(ReplyCache())
    budget = LMBudget(models.usage, 10, ("task",))
    first, second = ask(models, "Where does Tove row?"), ask(models, "Where does Tove row?")
    assert first == second
    usage = models.usage.snapshot()["task"]
    assert (usage.calls, usage.cache_hits, usage.live_calls) == (2, 1, 1)
    assert (budget.spent(), budget.cached()) == (1, 1)  # the budget counts the call that reached the model
    ask(models, "Where does Tove sail?")
    assert budget.spent() == 2


def test_the_key_is_what_the_model_is_sent_never_how_it_is_sent():
    messages = [{"role": "user", "content": "Where does Tove row?"}]
    key = request_key("m", None, messages, {"temperature": 0.0, "max_tokens": 64})
    assert key == request_key("m", None, messages, {"max_tokens": 64, "temperature": 0.0, "num_retries": 3,
                                                    "cache": False})
    assert key != request_key("m", None, messages, {"temperature": 0.7, "max_tokens": 64})
    assert key != request_key("m|http://other:8000/v1", None, messages, {"temperature": 0.0, "max_tokens": 64})
    assert key != request_key("m", None, [{"role": "user", "content": "Where does Tove sail?"}],
                              {"temperature": 0.0, "max_tokens": 64})


def test_a_served_reply_is_traced_as_a_cached_call_with_the_original_tokens():
    from memtrace_opt.data.loader import load_sample
    from memtrace_opt.programs.long_context import LongContextMemory

    conversation = load_sample().conversations[0]
    models = fake_models(ReplyCache())
    with dspy.context(lm=models.task):
        trace_conversation(LongContextMemory(), conversation, list(conversation.questions[:1]))
        again = trace_conversation(LongContextMemory(), conversation, list(conversation.questions[:1]))
    calls = [e for e in again.events if isinstance(e, LMCallEvent)]
    assert calls and all(e.cached for e in calls) and all(e.prompt_tokens for e in calls)


def test_a_persistent_cache_serves_a_later_process_and_a_layer_keeps_its_own_replies_apart(tmp_path):
    warm = ReplyCache(tmp_path / "warm.sqlite")
    warm.put("k1", CachedReply(("[[ ## answer ## ]]\nPorto",), 12, 3, 1.5))
    warm.close()
    again = ReplyCache(tmp_path / "warm.sqlite")
    assert again.get("k1") == CachedReply(("[[ ## answer ## ]]\nPorto",), 12, 3, 1.5)
    row = again.layered(tmp_path / "row.sqlite")
    row.put("k2", CachedReply(("Lisbon",)))
    assert row.get("k1") is not None and row.get("k2") is not None
    assert again.peek("k2") is None  # a row's replies never reach the snapshot another row reads
    other = again.layered(tmp_path / "other.sqlite")
    assert other.get("k2") is None and other.get("k1") is not None
    assert ReplyCache(tmp_path / "row.sqlite").get("k2") == CachedReply(("Lisbon",))  # kept for a resumed row


def test_a_row_resumed_in_a_later_sitting_is_charged_once_for_each_reply_it_had(tmp_path):
    warm = ReplyCache(tmp_path / "warm.sqlite")
    models = fake_models(warm)
    ask(models, "Where does Tove row?")  # the warm-up's reply: free for every row, in every sitting
    models.use_replies(warm.layered(tmp_path / "row.sqlite", carried=True))
    row = LMBudget(models.usage, 10, ("task",))
    ask(models, "Where does Tove sail?")  # the row's first sitting pays for its call, then is cut
    paid = row.tokens()
    with sqlite3.connect(tmp_path / "row.sqlite") as db:  # as if that call had taken the model 2.5 s
        db.execute("UPDATE replies SET reply = json_set(reply, '$.seconds', 2.5)")

    resumed = ReplyCache(tmp_path / "warm.sqlite").layered(tmp_path / "row.sqlite", carried=True)
    models = fake_models(resumed)
    budget = LMBudget(models.usage, 10, ("task",)).run_for(2.0)
    assert resumed.carried_seconds() == 2.5  # the first sitting's model time on the row
    for _ in range(2):
        ask(models, "Where does Tove row?")
        ask(models, "Where does Tove sail?")
    assert resumed.carried_seconds() == 0
    assert models.usage.replayed_seconds() == 2.5  # the clock moved as the first sitting's did: 2 s were not enough
    wall = time.monotonic()
    assert budget.now() >= wall + 2.5 and budget.out_of_time()
    usage = models.usage.snapshot()["task"]
    assert (budget.spent(), budget.cached()) == (1, 3)  # the row's own reply once more, as a live call; no model
    assert budget.tokens() == paid > 0 and usage.prompt_tokens + usage.completion_tokens == paid  # as it cost then
    fresh = fake_models(ReplyCache(tmp_path / "warm.sqlite").layered(tmp_path / "row.sqlite"))
    ask(fresh, "Where does Tove sail?")
    assert fresh.usage.snapshot()["task"].live_calls == 0  # a layer not carried serves its replies free


def test_a_reply_charged_again_is_traced_as_the_live_call_it_was(tmp_path):
    from memtrace_opt.data.loader import load_sample
    from memtrace_opt.programs.long_context import LongContextMemory

    conversation = load_sample().conversations[0]
    first = fake_models(ReplyCache(tmp_path / "row.sqlite"))
    with dspy.context(lm=first.task):
        paid = trace_conversation(LongContextMemory(), conversation, list(conversation.questions[:1]))
    first.reply_cache.close()
    with sqlite3.connect(tmp_path / "row.sqlite") as db:
        db.execute("UPDATE replies SET reply = json_set(reply, '$.seconds', 4.0)")

    resumed = fake_models(ReplyCache().layered(tmp_path / "row.sqlite", carried=True))
    with dspy.context(lm=resumed.task):
        again = trace_conversation(LongContextMemory(), conversation, list(conversation.questions[:1]))
        third = trace_conversation(LongContextMemory(), conversation, list(conversation.questions[:1]))
    before = [e for e in paid.events if isinstance(e, LMCallEvent)]
    charged = [e for e in again.events if isinstance(e, LMCallEvent)]
    assert charged and len(charged) == len(before)
    assert all(not e.cached and e.seconds == 4.0 for e in charged)  # what pricing learns from, as it was then
    assert [e.prompt_tokens for e in charged] == [e.prompt_tokens for e in before]
    assert all(e.cached for e in third.events if isinstance(e, LMCallEvent))  # charged once: then a cache hit


def test_a_damaged_row_is_a_miss_not_a_crash(tmp_path):
    path = tmp_path / "replies.sqlite"
    ReplyCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO replies (key, reply) VALUES ('bad', 'not json')")
    assert ReplyCache(path).get("bad") is None


def test_taking_the_cache_away_gives_dspys_cache_flag_back():
    models = Models(ModelRoles(task=ModelSpec("fake")))
    models.task.cache = True
    models.use_replies(ReplyCache())
    assert models.task.cache is False and models.task.reply_cache is not None
    models.use_replies(None)
    assert models.task.cache is True and models.task.reply_cache is None
