"""The small seams: selection, acceptance, splits, and the score book."""

from __future__ import annotations

import pytest

from memtrace_opt.data import load_sample
from memtrace_opt.errors import ConfigError
from memtrace_opt.optimizers import MostBlamed, StrictImprovement
from memtrace_opt.optimizers.evaluation.splits import SplitMode, make_splits, parse_fractions
from memtrace_opt.optimizers.loop.selection import RoundOutcome


def test_most_blamed_picks_the_top_and_moves_on_after_repeated_rejections():
    selector = MostBlamed(give_up_after=2)
    counts = {"a.predict": 3, "b.predict": 2}
    assert selector.select(counts, []) == "a.predict"
    assert selector.select({}, []) is None
    tired = [RoundOutcome("a.predict", False), RoundOutcome("a.predict", False)]
    assert selector.select(counts, tired) == "b.predict"
    assert selector.select(counts, [*tired, RoundOutcome("a.predict", True)]) == "a.predict"


def test_most_blamed_does_not_go_back_to_a_tired_predictor_while_another_is_fresh():
    selector = MostBlamed(give_up_after=2)
    counts = {"a.predict": 4, "b.predict": 1}
    history = [RoundOutcome("a.predict", False), RoundOutcome("a.predict", False), RoundOutcome("b.predict", True)]
    assert selector.select(counts, history) == "b.predict"  # a's two rejections still count after b's accepted step
    history.append(RoundOutcome("b.predict", False))
    assert selector.select(counts, history) == "b.predict"  # b rejected once since its accepted step: still fresh
    history.append(RoundOutcome("b.predict", False))
    assert selector.select(counts, history) == "a.predict"  # both tired, both rejected twice: the most blamed
    history.append(RoundOutcome("a.predict", False))
    assert selector.select(counts, history) == "b.predict"  # then the least rejected
    assert selector.select({"a.predict": 4}, history) == "a.predict"  # the only blamed one, tired or not


def test_strict_improvement_accepts_only_a_valset_gain():
    rule = StrictImprovement()
    assert not rule.on_minibatch(0.5, 0.5).ok and rule.on_minibatch(0.5, 0.6).ok
    assert rule.on_valset(0.5, 0.6).ok and not rule.on_valset(0.5, 0.5).ok
    assert "rejected" in rule.on_valset(0.5, 0.4).why
    from memtrace_opt.optimizers import LoopSettings, MemTraceOptimizer

    ties = MemTraceOptimizer(settings=LoopSettings.of(validate_ties=True)).acceptance_for(20)
    assert ties.on_minibatch(0.5, 0.5).ok and not ties.on_minibatch(0.5, 0.4).ok and not ties.on_valset(0.5, 0.5).ok
    assert not MemTraceOptimizer().acceptance_for(20).on_minibatch(0.5, 0.5).ok  # the default: a tie is not validated

    margin = MemTraceOptimizer(settings=LoopSettings.of(min_val_gain=0.05)).acceptance_for(20)  # two questions of 20
    assert not margin.on_valset(5 / 20, 6 / 20).ok and margin.on_valset(5 / 20, 7 / 20).ok
    assert "+ 0.050" in margin.on_valset(5 / 20, 6 / 20).why
    with pytest.raises(ConfigError, match="min_val_gain"):
        LoopSettings.of(min_val_gain=1.5)

    default = MemTraceOptimizer().acceptance_for(17)  # by default two validation questions net
    assert not default.on_valset(5 / 17, 6 / 17).ok and default.on_valset(5 / 17, 7 / 17).ok
    assert MemTraceOptimizer(settings=LoopSettings.of(min_val_questions=1)).acceptance_for(17).on_valset(5 / 17, 6 / 17).ok
    wide = MemTraceOptimizer(settings=LoopSettings.of(min_val_gain=0.2)).acceptance_for(17)  # the larger margin wins
    assert not wide.on_valset(5 / 17, 8 / 17).ok and wide.on_valset(5 / 17, 9 / 17).ok
    custom = StrictImprovement()
    assert MemTraceOptimizer(acceptance=custom).acceptance_for(17) is custom  # a rule given is used as is
    with pytest.raises(ConfigError, match="min_val_questions"):
        LoopSettings.of(min_val_questions=0)
    with pytest.raises(ConfigError, match="demo_pool"):
        LoopSettings.of(demo_pool=-1)
    with pytest.raises(ConfigError, match="demo_budget"):
        LoopSettings.of(demo_budget=0)


def test_question_split_is_deterministic_and_disjoint():
    dataset = load_sample()
    first = make_splits(dataset, split="0.4,0.3,0.3", seed=3)
    again = make_splits(dataset, split="0.4,0.3,0.3", seed=3)
    ids = {name: {q.question_id for c in getattr(first, name) for q in c.questions} for name in ("train", "val", "test")}
    assert ids == {name: {q.question_id for c in getattr(again, name) for q in c.questions} for name in ids}
    assert not (ids["train"] & ids["val"]) and not (ids["train"] & ids["test"]) and not (ids["val"] & ids["test"])
    assert sum(len(v) for v in ids.values()) == len(dataset.conversations[0].questions)
    assert first.mode == SplitMode.SINGLE == "questions (single conversation)"  # the sample: one conversation


def test_conversation_split_and_bad_specs():
    dataset = load_sample()
    splits = make_splits(dataset, train="sample-1")  # no --val and no other conversation: val from train's questions
    ids = {name: {q.question_id for c in getattr(splits, name) for q in c.questions} for name in ("train", "val")}
    assert splits.mode == SplitMode.TRAIN_VAL_SHARED and splits.test == () and not ids["train"] & ids["val"]
    assert len(ids["train"] | ids["val"]) == len(dataset.conversations[0].questions)
    with pytest.raises(ConfigError):
        make_splits(dataset, train="nope")
    with pytest.raises(ConfigError):
        parse_fractions("0.5,0.5")
    assert make_splits(dataset, split="1,1,1", per_split=2).sizes() == {"train": 2, "val": 2, "test": 2}


def test_proposer_drops_echoes_and_duplicates():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "Answer the question\nfrom the context, in a few words, naming the person the question asks about."
    replies = iter([" answer the question from the   context, in a few words, naming the person the question asks about.",
                    "Answer the question from the context, in a few words, naming the person the question asks for.",
                    "Answer briefly from the context.", "answer briefly from the context. ", "Answer briefly from the context."])
    rules = iter(["", "Keep the current instruction and add one or two precise rules that would have prevented "
                  "these failures."])
    lm = fake_lm([Skill(("new_instruction",), lambda call: {"new_instruction": next(replies)}),
                  Skill(("rules",), lambda call: {"rules": next(rules)})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer().propose(ProposalEvidence("answer.predict", "rag.answer", current), 3)
    # six attempts: no rule, then only the approach copied; a re-wrapped echo, an echo with one word changed,
    # two duplicates
    assert found == ["Answer briefly from the context."]


def test_proposer_asks_for_rules_and_appends_them_and_gives_an_echoed_slot_to_the_next_approach():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "Answer the question from the context."
    rules = iter([f"{current} Answer a when question with a date."])
    replies = iter([current, "Reply in at most five words, using the context only.", "Answer with a date when asked when."])
    approaches = []

    def reply(call):
        approaches.append(call.inputs["approach"])
        return {"new_instruction": next(replies)}

    lm = fake_lm([Skill(("new_instruction",), reply), Skill(("rules",), lambda call: {"rules": next(rules)})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer().propose(ProposalEvidence("answer.predict", "rag.answer", current), 3)
    # the rules reply repeated the instruction before its rule: only the rule is appended
    assert found[0] == "Answer the question from the context.\nAnswer a when question with a date."
    # then an echo (its slot goes to the next approach) and two rewrites
    assert found[1:] == ["Reply in at most five words, using the context only.", "Answer with a date when asked when."]
    assert len(approaches) == 3 and len(set(approaches)) == 3


def test_a_blame_tie_goes_to_the_predictor_blamed_upstream():
    from memtrace_opt.attribution import Verdict
    from memtrace_opt.optimizers.evaluation.blame import Blame

    def verdict(case: str, op_id: str) -> Verdict:
        return Verdict(case, "lineage", "ExtractionError", op_id, "x", None, "", 1.0)

    blame = Blame(by_predictor={"answer.predict": [verdict("a", "op:40"), verdict("b", "op:61")],
                                "extract_facts.predict": [verdict("c", "op:3"), verdict("d", "op:90")],
                                "update_decision.predict": [verdict("e", "op:1")]})
    assert list(blame.counts()) == ["extract_facts.predict", "answer.predict", "update_decision.predict"]
    assert MostBlamed().select(blame.counts(), []) == "extract_facts.predict"
    assert MostBlamed().select({"b.predict": 1, "a.predict": 1}, []) == "b.predict"  # the order it is given


def test_appended_rules_skip_lines_the_instruction_already_has():
    from memtrace_opt.optimizers.sources.replies import with_rules

    current = "Write down the facts.\n- Keep dates, times and places.\n- Write each fact once."
    echoed = "- Keep dates, times and places.\n- Keep dates, times and places.\n- Write each fact once."
    assert with_rules(current, echoed) == current  # nothing new: the proposer drops it as an echo
    assert with_rules(current, "- Keep dates, times and places.\n- Name the person in every fact.\n"
                                "- Name the person in every fact.") == current + "\n- Name the person in every fact."


def test_proposer_bounds_its_replies_and_drops_looped_lines():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "Write down the facts worth remembering about the speakers, one short sentence each. " * 10
    limits: dict[str, list[int | None]] = {"rules": [], "new_instruction": []}

    def rewrite(call):
        limits["new_instruction"].append(call.max_tokens)
        return {"new_instruction": "Write down the facts.\n- Name the person.\n- name the person.\n- Keep dates."}

    def rules(call):
        limits["rules"].append(call.max_tokens)
        return {"rules": "- Keep every date."}

    lm = fake_lm([Skill(("new_instruction",), rewrite), Skill(("rules",), rules)], max_tokens=4000)
    with dspy.context(lm=lm):
        found = ReflectiveProposer().propose(ProposalEvidence("extract.predict", "mem0.extract", current), 2)
    assert limits["rules"] == [160]
    assert limits["new_instruction"] == [64 + len(current) // 3]  # about 1.5 times the current instruction
    assert found[1] == "Write down the facts.\n- Name the person.\n- Keep dates."
    with dspy.context(lm=lm):
        ReflectiveProposer().propose(ProposalEvidence("extract.predict", "mem0.extract", "Be brief."), 2)
    assert limits["new_instruction"][-1] == 256  # a short instruction still gets room for a real rewrite


def test_a_case_shown_to_the_proposer_keeps_the_output_the_reason_and_the_end_of_a_long_input():
    from memtrace_opt.optimizers import OpEvidence

    shown = "earlier_messages: " + "Bartek: hi there. " * 300 + "\nnew_messages: Wenna: I adopted a cat named Sorrel."
    case = OpEvidence("c1", "What pet did Wenna adopt?", "a cat", "a dog", shown,
                      '["Wenna likes pets."]' + " filler" * 200, "the cat adoption in the new messages was not extracted")
    text = case.render(True, 1500)
    assert "Wenna: I adopted a cat named Sorrel." in text  # the end of the input, where the new messages are
    assert text.count("[...]") == 1 and "earlier_messages:" in text
    assert '["Wenna likes pets."]' in text and "was not extracted" in text
    assert len(text) <= 1600
    assert "Why this step was blamed" not in case.render(False, 1500)


def test_proposals_that_name_the_cases_people_are_dropped():
    import dspy

    from memtrace_opt.optimizers import OpEvidence, ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "Answer the question from the context, in a few words. A date is written like 12 March 2034."
    failed = OpEvidence("c1", "What does Odalys do on rainy evenings?", "knitting and chess", "None", "...", "None", "")
    evidence = ProposalEvidence("answer.predict", "long_context.answer", current, failures=(failed,))
    rules = iter(["- Remind Odalys to stretch after rowing."])
    replies = iter(["Answer about Odalys's hobbies in a few words.", "Answer in a few words; on 12 March 2034 style dates."
                    " Never reply None when the context names the thing."])
    lm = fake_lm([Skill(("rules",), lambda call: {"rules": next(rules)}),
                  Skill(("new_instruction",), lambda call: {"new_instruction": next(replies)})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer(attempts_per_candidate=1).propose(evidence, 3)
    # the rule and the rewrite naming Odalys are dropped; "March" is a word the instruction already uses
    assert found == ["Answer in a few words; on 12 March 2034 style dates. Never reply None when the context names the thing."]
    with dspy.context(lm=fake_lm([Skill(("rules",), lambda call: {"rules": "- Remind Odalys to rest."})])):
        kept = ReflectiveProposer(attempts_per_candidate=1, drop_case_specific=False).propose(evidence, 1)
    assert kept == [current + "\n- Remind Odalys to rest."]


def test_proposal_lines_that_copy_the_tracing_words_are_dropped():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "Answer the question from the context, in a few words."
    evidence = ProposalEvidence("answer.predict", "mem0.answer", current)
    leaked = ("- If the needed information reached the answer op, which did not use it (evidence: gold turn:D1:3), "
              "reply: None\n- Write a date as 12 March 2034.")
    rewrite = "Answer from the context in a few words.\nFix answer.predict at op:41 (D1:25).\nNever guess."
    lm = fake_lm([Skill(("rules",), lambda call: {"rules": leaked}),
                  Skill(("new_instruction",), lambda call: {"new_instruction": rewrite})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer(attempts_per_candidate=1).propose(evidence, 2)
    assert found == [current + "\n- Write a date as 12 March 2034.",
                     "Answer from the context in a few words.\nNever guess."]
    with dspy.context(lm=fake_lm([Skill(("rules",), lambda call: {"rules": "- Say which op:3 failed."})])):
        assert ReflectiveProposer(attempts_per_candidate=1).propose(evidence, 1) == []  # nothing left: an echo


def test_proposal_sentences_that_comment_on_the_rewrite_are_dropped():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = "You answer a question about a conversation, using only the context. If it is not there, reply: None"
    evidence = ProposalEvidence("answer.predict", "long_context.answer", current)
    # what the 1.5B reflection model wrote on the 63-question run: a description of its task, not a rule
    restated = ("This step adheres to the instruction that requires answering a question using the conversation "
                "memory provided. The rule broken is that the answer did not include the necessary information.\n"
                "The current instruction should include the necessary information for the question's context.")
    rewrite = ("Answer from the context in a few words. This step must keep the correct cases working.\n"
               "- Write a date as 12 March 2034. The failed cases show dates written as 'yesterday'.")
    lm = fake_lm([Skill(("rules",), lambda call: {"rules": restated}),
                  Skill(("new_instruction",), lambda call: {"new_instruction": rewrite})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer(attempts_per_candidate=1).propose(evidence, 2)
    # the rules were all commentary: the candidate would be the current instruction, an echo, so it is dropped
    assert found == ["Answer from the context in a few words.\n- Write a date as 12 March 2034."]
    kept_words = ProposalEvidence("answer.predict", "x.answer", "Follow the rules of this step. Reply briefly.")
    with dspy.context(lm=fake_lm([Skill(("rules",), lambda call: {"rules": "- This step never guesses a date."})])):
        assert ReflectiveProposer(attempts_per_candidate=1).propose(kept_words, 1) == [
            "Follow the rules of this step. Reply briefly.\n- This step never guesses a date."]  # its own words stay


def test_a_rewrite_that_only_cuts_the_current_instruction_is_an_echo():
    import dspy

    from memtrace_opt.optimizers import ProposalEvidence, ReflectiveProposer
    from memtrace_opt.testing import Skill, fake_lm

    current = ("You answer a question from the context. If the context does not state it, reply: None\n"
               "Otherwise reply in a few words. A when question is answered with a date such as 12 March 2034.")
    evidence = ProposalEvidence("answer.predict", "long_context.answer", current)
    # the 63-question run accepted this: the first line alone, which lost the held-out questions the rest answered
    replies = iter(["You answer a question from the context. If the context does not state it, reply: None",
                    "You answer a question from the context in a few words; a when question gets a date."])
    lm = fake_lm([Skill(("rules",), lambda call: {"rules": ""}),
                  Skill(("new_instruction",), lambda call: {"new_instruction": next(replies)})])
    with dspy.context(lm=lm):
        found = ReflectiveProposer(attempts_per_candidate=2).propose(evidence, 2)
    assert found == ["You answer a question from the context in a few words; a when question gets a date."]
