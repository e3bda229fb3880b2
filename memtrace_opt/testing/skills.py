"""Default fake-LM skills for the built-in memory systems' Signatures: plausible, deterministic, and
instruction-sensitive, so a test (or the optimizer) can show that a better instruction fixes an operation.

    engine = FakeEngine(skills=default_skills())
    with dspy.context(lm=fake_lm(engine=engine)):
        program(...)

Each skill is picked by the output field names of a Signature (see the table) and reads the input fields as
the ChatAdapter printed them: transcripts are "[Weekday, 12 April 2021]" header lines followed by
"Speaker: text" lines, memories are "- text" lines under such headers. The rules are lexical on purpose
(crude stemming, no synonyms): on the packaged sample about half of the questions come out right.

SKILL RULES (what each skill does, and what in the instruction changes it; keywords match case-insensitively
anywhere in the instruction text):

| skill (output fields) | behaviour | instruction rule |
|---|---|---|
| `facts` (mem0.extract_facts) | one fact per informative sentence of the new messages (3+ content words, not a question), first person rewritten to the speaker's name; image captions become "X shared a photo of ..." | no "date" in the instruction: facts holding a number or a time word (yesterday, last week, May, Monday, ...) are DROPPED. With "date", or a demo (a worked example before the request) whose facts hold a time word or number: relative times are resolved against the session date ("yesterday" -> "on 11 April 2021") |
| `memory_actions` (mem0.update_decision) | per fact, the most similar shown memory by token overlap (Jaccard): NONE if it holds all the fact's content words; a negation cue (cancelled, no longer, quit, ...) with overlap >= 0.2: DELETE that memory and ADD the fact; >= 0.4: UPDATE with the memory's text and the fact merged; else ADD | DELETE needs "contradict" in the instruction (else the fact is just ADDed); UPDATE needs "merge" (else ADD, leaving a stale duplicate) |
| `episode_ends` (evermemos.detect_boundary) | true when the newest messages share almost no content words with the current episode (Jaccard < 0.08) or open with a farewell/greeting | without "topic" in the instruction: always false |
| `episode` (evermemos.extract_episode) | "Speaker said that ..." sentences of the informative messages, in order | with "absolute": starts "On <date>," and resolves relative times; without: relative times stay ("yesterday") |
| `events` (evermemos.extract_event_log) | one event per informative sentence, named like `facts` | with "date": relative times resolved and each event ends "(<date>)"; without "date": events with a number or time word are DROPPED |
| `sufficient`, `missing_information` (evermemos.check_sufficiency) | sufficient when one context line covers >= 75% of the question's content words; else lists the uncovered words | without "enough" in the instruction: always sufficient |
| `queries` (evermemos.generate_queries) | the question's content words; the missing words with the question's names; each name with the missing words (at most 3, distinct) | none |
| `answer` (<system>.answer) | the context line that best covers the question's content words (the names in the question and at least one other question word must appear in it; coverage >= 50%; ties go to the later line), then, in its best-covering sentence, the key phrase: a date for "when", a number phrase for "how long/many", a proper noun for "where/which city", yes/no for yes-no questions, else the words after the last question word up to the next punctuation or function word | without "context" in the instruction: always "Not mentioned in the conversation". "when" answers give the resolved absolute date only with "date" in the instruction (else the raw relative words or the session date as written) |
| `verdict`, `reason` (the LLM judge, for runs whose every role is the fake model) | CORRECT when the prediction covers at least half of the gold answer's content words (or both decline, by `metrics.is_decline`), else WRONG | none |

Below the coverage threshold the answer skill abstains ("Not mentioned in the conversation").
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import date, timedelta

from memtrace_opt.data import ABSTAIN_ANSWER
from memtrace_opt.metrics.declines import is_decline
from memtrace_opt.testing.fake_lm import FakeCall, Skill
from memtrace_opt.text.words import CHAT_STOP_WORDS, MONTHS, RELATIVE_DAYS, WEEKDAYS

__all__ = ["default_skills", "ABSTAIN", "content_tokens", "parse_transcript", "resolve_relative"]

ABSTAIN = ABSTAIN_ANSWER  # the datasets' abstention answer, under the name the skills have exported

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+-]*")
_STOP = CHAT_STOP_WORDS
_WEEKDAY_NAMES = "|".join(WEEKDAYS)
_MONTH_TITLES = "|".join(m.capitalize() for m in MONTHS)
_TIME_WORDS = re.compile(
    r"\b(" + "|".join(RELATIVE_DAYS) + r"|last|next|ago|week|weekend|month|year|" + "|".join(MONTHS) + "|"
    + _WEEKDAY_NAMES + r")\b|\d",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(cancel\w*|no longer|not anymore|any ?more|quit|stopped|broke up|called off|moved away)\b", re.I)
_HEADER = re.compile(r"^\[(.*)\]$")
_SPEAKER_LINE = re.compile(r"^([A-Z][\w .'-]{0,40}?):\s+(.*)$")
_CAPTION = re.compile(r"\[shares an image: (.*?)\]")
_HEADER_DATE = re.compile(r"(\d{1,2}) ([A-Za-z]+) (\d{4})")


# text helpers -------------------------------------------------------------------------------------------
def _stem(word: str) -> str:
    """A crude suffix stripper: teaching/teach, moved/move, cities/city, lives/live meet."""
    word = word.lower().strip("'-").removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s", "e"):
        if len(word) >= len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_tokens(text: str) -> list[str]:
    """Lower-cased, lightly stemmed words that are not function words, in order."""
    out = []
    for raw in _WORD.findall(text):
        low = raw.lower().replace("'", "")
        if low in _STOP or raw.lower() in _STOP:
            continue
        out.append(_stem(raw))
    return out


def _jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa and sb else 0.0


def _has(instruction: str, word: str) -> bool:
    return word in instruction.lower()


def _header_date(header: str | None) -> date | None:
    if not header:
        return None
    match = _HEADER_DATE.search(header)
    if not match or match.group(2).lower() not in MONTHS:
        return None
    return date(int(match.group(3)), MONTHS.index(match.group(2).lower()) + 1, int(match.group(1)))


def _fmt(day: date) -> str:
    return f"{day.day} {day.strftime('%B %Y')}"


def parse_transcript(text: str) -> list[tuple[str | None, str | None, str]]:
    """(date header, speaker, text) per line of a transcript or memory list; headers set the date."""
    rows: list[tuple[str | None, str | None, str]] = []
    header: str | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        match = _HEADER.match(line)
        if match:
            header = match.group(1)
            continue
        line = line.removeprefix("- ")
        speaker_match = _SPEAKER_LINE.match(line)
        if speaker_match:
            rows.append((header, speaker_match.group(1), speaker_match.group(2)))
        else:
            rows.append((header, None, line))
    return rows


def resolve_relative(text: str, day: date | None) -> str:
    """Relative time words rewritten as absolute dates against `day` (no change without a day)."""
    if day is None:
        return text

    def weekday_before(match: re.Match[str]) -> str:
        target = WEEKDAYS.index(match.group(1).lower())
        delta = (day.weekday() - target) % 7 or 7
        return f"on {_fmt(day - timedelta(days=delta))}"

    rules: list[tuple[str, str | Callable[[re.Match[str]], str]]] = [
        (r"\byesterday\b", f"on {_fmt(day - timedelta(days=1))}"),
        (r"\btoday\b", f"on {_fmt(day)}"),
        (r"\btomorrow\b", f"on {_fmt(day + timedelta(days=1))}"),
        (r"\blast year\b", f"in {day.year - 1}"),
        (r"\bnext year\b", f"in {day.year + 1}"),
        (r"\blast week(end)?\b", lambda m: f"the week{m.group(1) or ''} before {_fmt(day)}"),
        (r"\blast month\b", f"in {(day.replace(day=1) - timedelta(days=1)).strftime('%B %Y')}"),
        (r"\bnext month\b", f"in {(day.replace(day=28) + timedelta(days=4)).strftime('%B %Y')}"),
        (rf"\blast ({_WEEKDAY_NAMES})\b", weekday_before),
    ]
    for pattern, replacement in rules:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return text


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\s+[-–—]\s+", text) if s.strip()]


def _third_person(sentence: str, speaker: str) -> str:
    """First-person words rewritten with the speaker's name (good enough for facts)."""
    rules = [
        (r"\bI'm\b", f"{speaker} is"), (r"\bI am\b", f"{speaker} is"), (r"\bI've\b", f"{speaker} has"),
        (r"\bI'll\b", f"{speaker} will"), (r"\bI'd\b", f"{speaker} would"), (r"\bI\b", speaker),
        (r"\b[Mm]y\b", f"{speaker}'s"), (r"\b[Mm]e\b", speaker), (r"\b[Mm]yself\b", speaker),
    ]
    for pattern, replacement in rules:
        sentence = re.sub(pattern, replacement, sentence)
    if not sentence.startswith(speaker):
        sentence = f"{speaker}: {sentence}"
    return sentence


def _informative(sentence: str) -> bool:
    return not sentence.endswith("?") and len(content_tokens(sentence)) >= 3


def _statements(text: str, session_day: date | None, *, resolve: bool) -> list[tuple[str, str]]:
    """(speaker, third-person statement) for each informative sentence and image of a transcript."""
    out: list[tuple[str, str]] = []
    for header, speaker, line in parse_transcript(text):
        speaker = speaker or "Someone"
        day = _header_date(header) or session_day
        captions = _CAPTION.findall(line)
        body = _CAPTION.sub("", line)
        for sentence in _sentences(body):
            if _informative(sentence):
                statement = _third_person(sentence, speaker)
                out.append((speaker, resolve_relative(statement, day) if resolve else statement))
        out.extend((speaker, f"{speaker} shared {caption.strip()}") for caption in captions)
    return out


# skills -------------------------------------------------------------------------------------------------
def _demo_replies(call: FakeCall) -> list[str]:
    """The replies of the demos a request carries (assistant messages before its own user message)."""
    return [str(m.get("content") or "") for m in call.messages[:-1] if m.get("role") == "assistant"]


def extract_facts(call: FakeCall) -> dict:
    # a worked example whose facts keep a date teaches what the instruction does not say
    keep_dates = _has(call.instruction, "date") or any(_TIME_WORDS.search(reply) for reply in _demo_replies(call))
    day = _header_date(call.inputs.get("session_date"))
    facts = []
    for _, statement in _statements(call.inputs.get("new_messages", ""), day, resolve=keep_dates):
        if not keep_dates and _TIME_WORDS.search(statement):
            continue
        facts.append(statement)
    return {"facts": list(dict.fromkeys(facts))}


def decide_memory_actions(call: FakeCall) -> dict:
    try:
        memories = json.loads(call.inputs.get("existing_memories") or "[]")
        facts = json.loads(call.inputs.get("new_facts") or "[]")
    except json.JSONDecodeError:
        memories, facts = [], []
    allow_delete, allow_update = _has(call.instruction, "contradict"), _has(call.instruction, "merge")
    actions: list[dict] = []
    for fact in facts:
        fact_tokens = content_tokens(fact)
        best_id, best_text, best = "", "", 0.0
        for memory in memories:
            score = _jaccard(fact_tokens, content_tokens(str(memory.get("text", ""))))
            if score > best:
                best_id, best_text, best = str(memory.get("id")), str(memory.get("text", "")), score
        if best_id and set(fact_tokens) <= set(content_tokens(best_text)):
            actions.append({"event": "NONE", "id": best_id, "text": best_text})
        elif _NEGATION.search(fact) and best >= 0.2 and allow_delete:
            actions.append({"event": "DELETE", "id": best_id, "text": best_text})
            actions.append({"event": "ADD", "id": "", "text": fact})
        elif best >= 0.4 and allow_update:
            merged = f"{best_text.rstrip('.')}; {fact}"
            actions.append({"event": "UPDATE", "id": best_id, "text": merged})
        else:
            actions.append({"event": "ADD", "id": "", "text": fact})
    return {"memory_actions": actions}


_OPENERS = re.compile(r"^\s*(?:[\w .'-]+:\s*)?(hey|hi|hello|bye|goodbye|talk to you|see you|anyway|by the way)\b", re.I)


def detect_boundary(call: FakeCall) -> dict:
    if not _has(call.instruction, "topic"):
        return {"episode_ends": False}
    history = content_tokens(call.inputs.get("current_episode", ""))
    newest_text = call.inputs.get("newest_messages", "")
    newest = content_tokens(newest_text)
    first = next((line for _, _, line in parse_transcript(newest_text)), "")
    opens = bool(_OPENERS.match(first))
    return {"episode_ends": _jaccard(history, newest) < 0.08 or opens}


def extract_episode(call: FakeCall) -> dict:
    absolute = _has(call.instruction, "absolute")
    day = _header_date(call.inputs.get("episode_date"))
    parts = []
    for speaker, statement in _statements(call.inputs.get("conversation", ""), day, resolve=absolute):
        parts.append(statement if statement.startswith(speaker) else f"{speaker} said that {statement}")
    text = " ".join(p.rstrip(".!") + "." for p in parts)
    if absolute and day is not None:
        text = f"On {_fmt(day)}, {text}"
    return {"episode": text}


def extract_event_log(call: FakeCall) -> dict:
    dated = _has(call.instruction, "date")
    day = _header_date(call.inputs.get("episode_date"))
    events = []
    for _, statement in _statements(call.inputs.get("conversation", ""), day, resolve=dated):
        if dated:
            events.append(f"{statement.rstrip('.!')} ({_fmt(day)})" if day else statement)
        elif not _TIME_WORDS.search(statement):
            events.append(statement)
    return {"events": list(dict.fromkeys(events))}


def _question_parts(question: str) -> tuple[list[str], list[str]]:
    """(content tokens, names) of a question; names are capitalised words after the first."""
    question = re.sub(r"\(asked on .*?\)", "", question)
    words = _WORD.findall(question)
    names = [_stem(w) for w in words[1:] if w[:1].isupper() and w.lower() not in _STOP]
    return content_tokens(question), names


def _coverage(q_tokens: list[str], text: str) -> float:
    line = set(content_tokens(text))
    return sum(1 for t in set(q_tokens) if t in line) / len(set(q_tokens)) if q_tokens else 0.0


def check_sufficiency(call: FakeCall) -> dict:
    if not _has(call.instruction, "enough"):
        return {"sufficient": True, "missing_information": ""}
    q_tokens, _ = _question_parts(call.inputs.get("question", ""))
    rows = parse_transcript(call.inputs.get("context", ""))
    best = max((_coverage(q_tokens, f"{s or ''} {t}") for _, s, t in rows), default=0.0)
    if best >= 0.75:
        return {"sufficient": True, "missing_information": ""}
    seen = set(content_tokens(call.inputs.get("context", "")))
    missing = [t for t in dict.fromkeys(q_tokens) if t not in seen] or q_tokens
    return {"sufficient": False, "missing_information": " ".join(missing)}


def generate_queries(call: FakeCall) -> dict:
    q_tokens, names = _question_parts(call.inputs.get("question", ""))
    missing = content_tokens(call.inputs.get("missing_information", ""))
    candidates = [" ".join(q_tokens), " ".join(dict.fromkeys([*names, *missing]))]
    candidates += [" ".join(dict.fromkeys([name, *missing])) for name in names]
    queries = [q for q in dict.fromkeys(candidates) if q.strip()]
    return {"queries": queries[:3]}


_NUMBER_PHRASE = re.compile(
    r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|a few|several)\s+"
    r"(years?|months?|weeks?|days?|hours?|minutes?|times?|kids|children|classes|people|miles|km)\b",
    re.I,
)
_ABS_DATE = re.compile(
    r"\b(?:the week(?:end)? before \d{1,2} [A-Z][a-z]+ \d{4}|\d{1,2} [A-Z][a-z]+ \d{4}|"
    r"(?:" + _MONTH_TITLES + r") \d{4}|in \d{4})\b"
)
_RELATIVE = re.compile(
    r"\b(yesterday|today|last (?:week(?:end)?|month|year|" + _WEEKDAY_NAMES + r")|"
    r"next (?:week|month|year)|in (?:" + _MONTH_TITLES + r"))\b",
    re.I,
)
_MONTH = re.compile(r"\b(" + _MONTH_TITLES + r")\b")
_YES_NO = re.compile(r"^(is|are|was|were|do|does|did|has|have|had|will|would|can|could)\b", re.I)
_PHRASE_BREAK = re.compile(r"[,.;:!?()\[\]\"–—]| - ")


_LEADING_DATE = re.compile(r"^On (\d{1,2} [A-Z][a-z]+ \d{4}),\s*")
_TRAILING_DATE = re.compile(r"\s*\((\d{1,2} [A-Z][a-z]+ \d{4})\)[.!]?\s*$")


def _key_phrase(question: str, text: str, header: str | None, dated: bool) -> str:
    q = question.lower().strip()
    for pattern in (_LEADING_DATE, _TRAILING_DATE):  # "On <date>, ..." / "... (<date>)": the memory's own date
        found_date = pattern.search(text)
        if found_date:
            header, text = found_date.group(1), pattern.sub("", text)
    q_tokens, name_list = _question_parts(question)
    names = set(name_list)
    if q.startswith("when"):
        if dated:
            found = _ABS_DATE.search(text)
            if found:
                return found.group(0).removeprefix("in ")
            day = _header_date(header)
            month = _MONTH.search(text)
            if month and day:
                return f"{month.group(1).capitalize()} {day.year}"
            relative = _RELATIVE.search(text)
            if day and relative:
                resolved = resolve_relative(relative.group(0), day)
                return re.sub(r"^(on|in) ", "", resolved)
            return _fmt(day) if day else (header or "")
        relative = _RELATIVE.search(text)
        return relative.group(0) if relative else (header or "")
    if q.startswith(("how long", "how many", "how much", "how old")):
        found = _NUMBER_PHRASE.search(text)
        if found:
            return found.group(0)
    if _YES_NO.match(q):
        return "No" if _NEGATION.search(text) or re.search(r"\bnot\b|n't\b", text) else "Yes"
    words = _WORD.findall(text)
    if q.startswith(("where", "which city", "which country", "what city", "in which")):
        proper = [w for w in words[1:] if w[:1].isupper() and _stem(w) not in q_tokens and w.lower() not in _STOP
                  and w.lower() not in MONTHS + WEEKDAYS]
        if proper:
            return proper[0]
    # the words after the last question word (not a name), up to punctuation or the next function word
    last = -1
    for i, word in enumerate(words):
        if _stem(word) in q_tokens and _stem(word) not in names:
            last = i
    tail_text = text
    if last >= 0:
        pattern = r"\b" + re.escape(words[last]) + r"\b"
        matches = list(re.finditer(pattern, text))
        if matches:
            tail_text = text[matches[-1].end():]
    tail_text = _PHRASE_BREAK.split(tail_text, maxsplit=1)[0]
    phrase: list[str] = []
    for word in _WORD.findall(tail_text):
        if word.lower() in _STOP or word.lower().replace("'", "") in _STOP:
            if phrase:
                break
            continue
        phrase.append(word)
        if len(phrase) >= 6:
            break
    if phrase:
        return " ".join(phrase)
    fallback = [w for w in words if _stem(w) not in q_tokens and w.lower() not in _STOP]
    return " ".join(fallback[:5]) or text


def answer(call: FakeCall) -> dict:
    return {"answer": _answer(call)}


def _answer(call: FakeCall) -> str:
    if not _has(call.instruction, "context"):
        return ABSTAIN
    question = re.sub(r"\s*\(asked on .*?\)", "", call.inputs.get("question", ""))
    q_tokens, names = _question_parts(question)
    if not q_tokens:
        return ABSTAIN
    best: tuple[float, int] = (0.0, -1)
    rows = parse_transcript(call.inputs.get("context", ""))
    topic = set(q_tokens) - set(names)
    for i, (_, speaker, text) in enumerate(rows):
        full = f"{speaker or ''} {text}"
        line_tokens = set(content_tokens(full))
        if any(name not in line_tokens for name in names) or (topic and not topic & line_tokens):
            continue
        score = _coverage(q_tokens, full)
        if score >= best[0] and score > 0:  # ties go to the later (more recent) line
            best = (score, i)
    if best[1] < 0 or best[0] < 0.5:
        return ABSTAIN
    header, _, text = rows[best[1]]
    sentences = _sentences(text) or [text]
    sentence = max(sentences, key=lambda part: _coverage(q_tokens, part))  # the first best-covering sentence
    lead = _LEADING_DATE.search(text)
    if lead and sentence is not sentences[0]:
        header = lead.group(1)  # an episode's opening date applies to all its sentences
    dated = _has(call.instruction, "date")
    phrase = _key_phrase(question, sentence, header, dated)
    return phrase


def judge(call: FakeCall) -> dict:
    gold, prediction = call.inputs.get("gold_answer", ""), call.inputs.get("prediction", "")
    gold_declines, declines = is_decline(gold), is_decline(prediction)
    if gold_declines or declines:
        correct = gold_declines and declines
    else:
        correct = _coverage(content_tokens(gold), prediction) >= 0.5
    verdict = "CORRECT" if correct else "WRONG"
    return {"reason": f"the prediction {'matches' if correct else 'does not match'} the gold answer", "verdict": verdict}


def default_skills() -> list[Skill]:
    """Skills for every built-in Signature (see SKILL RULES in the module docstring), and for the prompts of the
    Mem0 library (`mem0_skills.py`)."""
    from memtrace_opt.testing.mem0_skills import mem0_skills

    return [
        Skill(outputs=("facts",), fn=extract_facts, name="extract_facts"),
        Skill(outputs=("memory_actions",), fn=decide_memory_actions, name="update_decision"),
        Skill(outputs=("episode_ends",), fn=detect_boundary, name="detect_boundary"),
        Skill(outputs=("episode",), fn=extract_episode, name="extract_episode"),
        Skill(outputs=("events",), fn=extract_event_log, name="extract_event_log"),
        Skill(outputs=("sufficient",), fn=check_sufficiency, name="check_sufficiency"),
        Skill(outputs=("queries",), fn=generate_queries, name="generate_queries"),
        Skill(outputs=("answer",), fn=answer, name="answer"),
        Skill(outputs=("verdict",), fn=judge, name="judge"),
        *mem0_skills(),
    ]
