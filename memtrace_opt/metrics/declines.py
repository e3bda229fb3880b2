"""Whether a reply declines to answer: the one rule that scoring, the memory programs and the optimizer read.

A reply declines when its whole content says the answer is not there:
- it is a short decline, once a lead-in ("The answer is", "It is") and a pointer to the source ("in the
  conversation", "from the context") are set aside: "None", "N/A", "No answer", "Unknown", "Not mentioned",
  "Not provided in the context", "No idea", "Unclear", "I don't know";
- or it says the source lacks the information, wherever in the reply: "not mentioned", "never says", "the
  conversation does not mention", "there is no information about", "not enough information", "cannot be
  determined", "I don't know", "... is unknown".
A reply that uses such a word inside an answer is an answer: "an unknown artist", "none of them were hurt",
"None, she walks to work", "not the red one", "Nothing", "No one", "No" (to a yes/no question), "The pool was
not available that day". An empty reply is no reply, not a decline: a failed call must not earn an
abstention's credit (the programs treat an empty reply as a non-answer themselves).
"""

from __future__ import annotations

import re

__all__ = ["is_decline"]

# a lead-in a model puts before the decline itself
_LEAD_IN = re.compile(r"^(?:(?:final )?answer\s*:|(?:the )?answer (?:is|would be)|it (?:is|was)|it's|that (?:is|was)|that's"
                      r"|this (?:is|was)|(?:the )?information (?:is|was))\s+")
# where the information was looked for: "in the conversation", "based on the given context"
_SOURCE = re.compile(
    r"\s+(?:in|from|by|within|based on|according to|given) (?:the |this |my |our )?(?:given |provided |available )?"
    r"(?:conversations?|context|memor(?:y|ies)|text|transcripts?|dialogues?|information|notes|records?|data|sessions?"
    r"|chat|question)$"
)
# the whole reply, lead-in and source set aside
_SHORT = re.compile(
    r"none(?: (?:mentioned|given|stated|specified|found|provided|known|listed|recorded|available))?"
    r"|n/?a|not applicable|unknown|answer unknown|unanswerable|undetermined|unspecified|unstated|unavailable"
    r"|unclear|uncertain|unsure|indeterminate|idk|no idea|hard to (?:say|tell)|(?:cannot|can't|can not) (?:say|tell)"
    r"|no (?:answer|info|information|data|details|record|mention)(?: (?:available|given|found|provided|recorded))?"
    r"|(?:not|never) (?:\w+ly )?(?:mentioned|specified|stated|provided|available|given|known|discussed|said|recorded"
    r"|found|clear|sure|certain|determinable)"
)
# a statement that the source lacks the information, wherever it stands
_STATES_MISSING = re.compile(
    r"\b(?:not|never) (?:\w+ly )?(?:mentioned|specified|stated)\b|n't (?:\w+ly )?(?:mentioned|specified|stated)\b"
    r"|\bnever (?:mentions|says|specifies|states)\b|\bno (?:\w+ )?mention\b"
    r"|\bnothing (?:is |was )?(?:mentioned|specified|stated|said about)\b"
    r"|\b(?:does|did|do)(?: not|n't) (?:\w+ly )?(?:mention|say|specify|state)\b"
    r"|\bnot (?:in|part of|found in|included in|covered (?:in|by)) the (?:conversation|context|memor(?:y|ies)|text"
    r"|transcript|dialogue|notes|records?)\b"
    r"|\bno (?:relevant |specific |further |additional |such )?(?:information|info|records?)\b"
    r"|\b(?:not enough|insufficient) (?:information|info|context|data|details)\b"
    r"|\binformation (?:\w+ )?(?:is|was)(?: not|n't) (?:enough|available|provided|given)\b"
    r"|\b(?:cannot|can't|can not) be (?:determined|answered)\b"
    r"|\b(?:cannot|can't|can not|unable to|could not|couldn't) (?:determine|answer)\b"
    r"|\b(?:not possible|impossible) to (?:determine|tell|know|say)\b"
    r"|\bi (?:do not|don't|dont) know\b|\bunanswerable\b"
    r"|\b(?:is|are|was|were|remains?) (?:still )?(?:unknown|not known)\s*(?:[.;:!,)]|$)"
)


def _core(text: str) -> str:
    core = " ".join(text.lower().replace("\u2019", "'").split()).strip(" \t\"'`.!,;:()[]*_-")
    core = _LEAD_IN.sub("", core)
    return _SOURCE.sub("", core).strip(" \"'`.!,;:()[]*_-")


def is_decline(reply: str | None) -> bool:
    """Whether `reply` declines to answer (module doc): its whole content is a short decline, or it states that
    the source lacks the information. False for an empty reply and for an answer that merely holds such a word."""
    text = "" if reply is None else str(reply)
    if not text.strip():
        return False
    if _SHORT.fullmatch(_core(text)):
        return True
    return bool(_STATES_MISSING.search(" ".join(text.lower().replace("\u2019", "'").split())))
