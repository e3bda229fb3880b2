"""What the reflective source cuts from a reply (`replies.py`): a stronger model's well-formed proposals pass
unchanged (month and weekday names, "root cause" or "each step" in a sentence of advice, a worked example), while
what a small model writes and no instruction holds is still dropped (echoes of the prompt's headings, commentary
in its words, the cases' people)."""

from __future__ import annotations

import dspy

from memtrace_opt.optimizers import OpEvidence, ProposalEvidence, ReflectiveProposer
from memtrace_opt.optimizers.sources.replies import case_names, without_commentary, without_headings
from memtrace_opt.testing import Skill, fake_lm

CURRENT = "Answer the question from the context, in a few words."
SHOWN = ("[[ ## context ## ]]\n[Saturday, 8 March 2030]\nOdalys: I repainted my boat last Monday.\n"
         "Teodor: It looks great in green.\n\n[[ ## question ## ]]\nWhen did Odalys repaint her boat?")
FAILED = OpEvidence("c1", "When did Odalys repaint her boat?", "3 March 2030", "last Monday", SHOWN, "last Monday",
                    "the answer op gave a relative day")
CORRECT = OpEvidence("c2", "What colour is the boat now?", "green", "green", SHOWN, "green")
EVIDENCE = ProposalEvidence("answer.predict", "long_context.answer", CURRENT, failures=(FAILED,), successes=(CORRECT,))

# well-formed proposals a served model writes (invented): each passes as written
RULES = ("- When the question asks when something happened, give the calendar date, such as 9 March 2031, never a "
         "weekday like Monday alone.\n"
         "- If the speaker names the root cause of a problem, answer with that cause in a few words.")
REWRITE = ("Answer the question from the context in a few words.\n"
           "When each step of a plan is asked for, list the steps in the order the speaker gives them.\n"
           "If the question quotes an instruction the speaker gave, repeat the instruction as given.\n"
           "Example:\nQuestion: When did Ana move to Lisbon?\nAnswer: 14 October 2031")
FENCED = "Answer from the context in a few words.\nReply `None` only when the context never mentions it."


def propose(rules: str, rewrites: list[str], k: int) -> list[str]:
    replies = iter(rewrites)
    lm = fake_lm([Skill(("rules",), lambda call: {"rules": rules}),
                  Skill(("new_instruction",), lambda call: {"new_instruction": next(replies)})])
    with dspy.context(lm=lm):
        return ReflectiveProposer(attempts_per_candidate=1).propose(EVIDENCE, k)


def test_well_formed_proposals_pass_unchanged():
    found = propose(RULES, [REWRITE, f"```text\n{FENCED}\n```"], 3)
    assert found == [f"{CURRENT}\n{RULES}", REWRITE, FENCED]  # only the code fence around the last one goes


def test_what_a_small_model_writes_and_no_instruction_holds_is_dropped():
    rules = "Gold answer: 3 March 2030\n- Remind Odalys to check the calendar."  # names the case's person
    echoed = ("Answer the question in a few words.\nCase 1:\nThis step produced: last "
              "Monday\nThe current instruction misses dates. Resolve a relative day to its calendar date.")
    speaker = "Answer in a few words, and ask Teodor when unsure."  # a speaker of the context shown
    found = propose(rules, [echoed, speaker], 3)
    assert found == ["Answer the question in a few words.\nResolve a relative day to its calendar date."]


def test_the_cases_people_are_their_speakers_and_the_names_in_their_questions():
    assert case_names(EVIDENCE) == {"Odalys", "Teodor"}  # not "March", "Monday", "Saturday", "When", "What"
    pottery = OpEvidence("c3", "What did Bram teach Odalys?", "Pottery", "carving", "Bram: I teach pottery.", "carving")
    assert case_names(ProposalEvidence("a.predict", "x.answer", CURRENT, failures=(pottery,))) == {"Bram", "Odalys"}
    uses = ProposalEvidence("a.predict", "x.answer", "Answer about Odalys.", failures=(FAILED,))
    assert case_names(uses) == {"Teodor"}  # a name the instruction uses is no case's


def test_headings_and_commentary_go_and_advice_in_the_same_words_stays():
    assert without_headings("[[ ## rules ## ]]\nMistake: the answer is late.\nStep 1: read the context.\n"
                            "- Why this step was blamed: x\nQuestion: When did Ana move?") == (
        "Step 1: read the context.\nQuestion: When did Ana move?")  # a worked example's "Question:" stays
    advice = "Name the root cause the speaker gives. Do each step in order. Follow the instruction in the question."
    assert without_commentary(advice, CURRENT) == advice
    commentary = "The failed cases show relative days. Use the calendar date. The gold answer is a date."
    assert without_commentary(commentary, CURRENT) == "Use the calendar date."
