"""How fast a model reads prompts and decodes replies on this machine: measured, stored, looked up.

`memtrace doctor` measures the task model's rates (a prompt of a few hundred tokens, then a short decode, both
uncached) and stores them in `rates.json` beside the model cache, keyed by machine and model; a job's time
estimate reads them. A slowed fake LM's rates are known from its settings.

Beside the rates, how long the model's replies are: a job's dry run scripts each reply, but a model may write far
longer ones (a library's extraction prompt answered to the reply cap). Each run, optimization and comparison
keeps the mean reply of its live calls by call shape (`chat_prompt.call_shape`: the adapter prompt's output
fields) into the stored rates (`RateStore.learn`), and later estimates price a call of a known shape at that mean.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dspy

__all__ = ["RATES_SCHEMA", "Rates", "RateStore", "rates_path", "machine_id", "model_key", "measure_rates",
           "known_rates", "words"]

RATES_SCHEMA = 1
LEARNED_CALLS = 200  # earlier calls a learned reply length weighs at most (`RateStore.learn`)
_SPEED_LEVERS = ("n_threads", "n_threads_batch", "n_batch", "flash_attn")  # what changes an embedded model's rates


def words(texts: Any) -> int:
    """Whitespace words of `texts` (the fake LM's token count: the dry run counts in these)."""
    return sum(len(str(text).split()) for text in texts)


@dataclass(frozen=True)
class Rates:
    """A model's speed on a machine: prompt tokens read and completion tokens decoded per second, and its tokens
    per whitespace word of a prompt (the dry run of a job counts words). `source`: "doctor" (`memtrace doctor`),
    "start" (measured as a job started) or "known" (a slowed fake LM's own settings)."""

    prompt_tps: float
    decode_tps: float
    tokens_per_word: float = 1.0
    model: str = ""
    machine: str = ""
    measured_at: str = ""
    source: str = "doctor"
    replies: dict[str, list[float]] = field(default_factory=dict)  # call shape -> [live calls, mean reply tokens]

    def call_seconds(self, prompt_words: int, reply_words: int, reply_cap: int | None, shape: str = "") -> float:
        """One call's seconds: its prompt read, its reply (capped by the call's reply limit) decoded."""
        prompt, reply = self.tokens(prompt_words, reply_words, reply_cap, shape)
        return prompt / self.prompt_tps + reply / self.decode_tps

    def tokens(self, prompt_words: int, reply_words: int, reply_cap: int | None,
               shape: str = "") -> tuple[float, float]:
        """A call's prompt and reply tokens: the reply as long as this model's replies to calls of `shape` have
        been (`replies`), else the scripted reply's words; capped by the call's reply limit."""
        measured = self.replies.get(shape)
        reply = float(measured[1]) if measured else reply_words * self.tokens_per_word
        return prompt_words * self.tokens_per_word, min(reply, reply_cap) if reply_cap else reply

    def describe(self) -> str:
        def rate(value: float) -> str:
            return "instant" if math.isinf(value) else f"{value:,.0f} tokens/s"

        return f"reads {rate(self.prompt_tps)}, decodes {rate(self.decode_tps)}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("prompt_tps", "decode_tps"):
            data[key] = None if math.isinf(data[key]) else round(data[key], 2)
        data["tokens_per_word"] = round(self.tokens_per_word, 3)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rates:
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for key in ("prompt_tps", "decode_tps"):
            values[key] = math.inf if values.get(key) is None else float(values[key])
        replies = values.get("replies")
        values["replies"] = ({shape: list(v) for shape, v in replies.items() if _pair(v)}
                             if isinstance(replies, dict) else {})
        return cls(**values)


def rates_path() -> Path:
    """$MEMTRACE_CACHE_DIR/rates.json, else $XDG_CACHE_HOME or ~/.cache, /memtrace-opt/rates.json."""
    root = os.environ.get("MEMTRACE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "rates.json"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "memtrace-opt" / "rates.json"


class RateStore:
    """rates.json: {schema_version, machines: {machine: {model: Rates}}}. A missing or unreadable file holds none."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or rates_path()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        machines = data.get("machines") if isinstance(data, dict) else None
        return machines if isinstance(machines, dict) else {}

    def get(self, model: str, machine: str | None = None) -> Rates | None:
        found = self._read().get(machine or machine_id(), {}).get(model)
        try:
            return Rates.from_dict(found) if isinstance(found, dict) else None
        except (TypeError, ValueError):
            return None

    def put(self, rates: Rates) -> Path:
        """Stores `rates` (measured again: the reply lengths learned so far are kept)."""
        machines = self._read()
        kept = machines.get(rates.machine, {}).get(rates.model)
        data = rates.to_dict()
        if isinstance(kept, dict) and isinstance(kept.get("replies"), dict) and not rates.replies:
            data["replies"] = kept["replies"]
        machines.setdefault(rates.machine, {})[rates.model] = data
        return self._write(machines)

    def learn(self, model: str, observed: dict[str, tuple[int, int]], machine: str | None = None) -> bool:
        """Folds `observed` (call shape -> live calls, reply tokens) into the reply lengths of `model`'s stored
        rates; False (nothing written) when none are stored. The mean weighs at most `LEARNED_CALLS` earlier calls,
        so it follows a model whose replies change. A file that cannot be written raises OSError, as `put` does."""
        observed = {shape: seen for shape, seen in observed.items() if seen[0] > 0}
        machines = self._read()
        entry = machines.get(machine or machine_id(), {}).get(model)
        if not observed or not isinstance(entry, dict):
            return False
        stored = entry.get("replies")
        replies: dict[str, Any] = stored if isinstance(stored, dict) else {}
        for shape, (calls, tokens) in observed.items():
            before: Any = replies.get(shape)
            known, mean = (0, 0.0)
            if _pair(before):
                known, mean = min(int(before[0]), LEARNED_CALLS), float(before[1])
            replies[shape] = [known + calls, round((known * mean + tokens) / (known + calls), 1)]
        entry["replies"] = replies
        self._write(machines)
        return True

    def _write(self, machines: dict[str, Any]) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"schema_version": RATES_SCHEMA, "machines": machines}, indent=2,
                                        sort_keys=True) + "\n", encoding="utf-8")
        temporary.replace(self.path)
        return self.path


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value)


def machine_id() -> str:
    """This machine as its rates depend on it: CPU model, cores, and the widest vector extension."""
    name, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name:
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = value
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    found = flags.split()
    vectors = "AVX-512" if "avx512f" in found else "AVX2" if "avx2" in found else ""
    return ", ".join(p for p in (name, f"{os.cpu_count()} cores", vectors) if p)


def model_key(spec: Any) -> str:
    """A role's model as its rates depend on it: the model, its server, and the engine levers that set speed."""
    levers = [f"{k}={spec.extra[k]}" for k in _SPEED_LEVERS if k in spec.extra]
    return " ".join([spec.model, *([f"@{spec.api_base}"] if spec.api_base else []), *levers])


def known_rates(lm: Any) -> Rates | None:
    """The rates of a fake LM, known from its engine's settings (infinite for an unslowed one); None otherwise."""
    from memtrace_opt.testing.fake_lm import FakeEngine

    engine = getattr(lm, "engine", None)
    if not isinstance(engine, FakeEngine):
        return None

    def per_second(seconds: float) -> float:
        return 1.0 / seconds if seconds > 0 else math.inf

    return Rates(per_second(engine.prompt_token_seconds), per_second(engine.completion_token_seconds), 1.0,
                 model=str(getattr(lm, "model", "fake")), machine=machine_id(), source="known")


class _Measure(dspy.Signature):
    """You answer a question about a conversation, using only the notes given as context. Reply in a few words."""

    context: str = dspy.InputField(desc="notes on the conversation, dated")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


_PEOPLE = ("Mira Okafor", "Tomasz Lind", "Ines Varga", "Paulo Reyes", "Hana Sato", "Jonas Brekke")
_DOINGS = ("planted tomatoes in the allotment behind the library", "joined a bell-ringing club in Dunmere",
           "fixed the bicycle her brother left in the shed", "baked rye bread for the street fair",
           "booked a train to the coast for the long weekend", "started reading a novel about lighthouse keepers")


def _measure_prompt(target_words: int) -> list[dict[str, Any]]:
    """A ChatAdapter prompt of about `target_words` words of invented notes, opened by a fresh nonce so that no
    cache (DSPy's, or an engine's kept prefix) serves any of it."""
    lines: list[str] = []
    day = 1
    while words(lines) < target_words:
        person, doing = _PEOPLE[day % len(_PEOPLE)], _DOINGS[(day * 5) % len(_DOINGS)]
        lines.append(f"- [{day} March 2024] {person} {doing}, and said it went better than planned.")
        day += 1
    inputs = {"context": "\n".join(lines), "question": "Who baked rye bread for the street fair?"}
    messages = dspy.ChatAdapter().format(_Measure, demos=[], inputs=inputs)
    messages[0] = {**messages[0], "content": f"Request {uuid.uuid4().hex[:12]}.\n{messages[0]['content']}"}
    return list(messages)


def _timed_call(lm: Any, messages: list[dict[str, Any]], max_tokens: int) -> tuple[float, int, int]:
    """(seconds, prompt tokens, completion tokens) of one call of `lm` (a RoleLM: its tracker counts tokens)."""
    from dspy import lm15

    system = "\n".join(str(m["content"]) for m in messages if m["role"] == "system") or None
    turns = tuple(lm15.Message.user(str(m["content"])) if m["role"] == "user" else
                  lm15.Message.assistant([lm15.TextPart(str(m["content"]))]) for m in messages if m["role"] != "system")
    request = lm15.Request(model=str(lm.model), messages=turns, system=system,
                           config=lm15.Config(max_tokens=max_tokens))
    prompt_before, completion_before = _total_tokens(lm)
    started = time.perf_counter()
    lm(request)
    seconds = time.perf_counter() - started
    prompt, completion = _total_tokens(lm)
    return seconds, prompt - prompt_before, completion - completion_before


def _total_tokens(lm: Any) -> tuple[int, int]:
    usage = lm.usage.snapshot()
    return (sum(u.prompt_tokens for u in usage.values()), sum(u.completion_tokens for u in usage.values()))


class _CutOnPurpose(logging.Filter):
    """Drops DSPy's warning that a reply was truncated: the measuring calls cut their replies short on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("LM response was truncated")


@contextmanager
def _truncation_expected() -> Iterator[None]:
    """DSPy's truncation warnings (logger `dspy.clients.lm`) kept out of the user's terminal while inside."""
    logger, cut = logging.getLogger("dspy.clients.lm"), _CutOnPurpose()
    logger.addFilter(cut)
    try:
        yield
    finally:
        logger.removeFilter(cut)


def measure_rates(lm: Any, *, model: str, prompt_words: int = 280, decode_tokens: int = 32,
                  source: str = "doctor") -> Rates:
    """Measure `lm` (a RoleLM built uncached; for the embedded model, with its prefix cache off): one tiny call
    first (a local model loads), a prompt of about `prompt_words` words read with a one-token reply (the reading
    rate, and the model's tokens per word), then a short prompt and `decode_tokens` decoded (the decoding rate,
    its prompt's reading time taken off). A few seconds on a small local model. The replies are cut short on
    purpose: DSPy's warning that they were truncated is not shown."""
    with _truncation_expected():
        return _measure(lm, model, prompt_words, decode_tokens, source)


def _measure(lm: Any, model: str, prompt_words: int, decode_tokens: int, source: str) -> Rates:
    _timed_call(lm, [{"role": "user", "content": f"{uuid.uuid4().hex[:8]}: reply with OK."}], 1)
    messages = _measure_prompt(prompt_words)
    seconds, prompt_tokens, _ = _timed_call(lm, messages, 1)
    if prompt_tokens <= 0:
        raise ValueError(f"{model} reported no prompt tokens: its rates cannot be measured")
    prompt_tps = prompt_tokens / seconds if seconds > 0 else math.inf
    count = [{"role": "user", "content": f"Request {uuid.uuid4().hex[:8]}. Count from one to one hundred in "
                                         "words, separated by commas."}]
    seconds, short_prompt, completion = _timed_call(lm, count, decode_tokens)
    decoding = seconds - short_prompt / prompt_tps
    decode_tps = completion / decoding if decoding > 0 and completion else math.inf
    return Rates(prompt_tps, decode_tps, prompt_tokens / max(1, words(m["content"] for m in messages)),
                 model=model, machine=machine_id(), source=source,
                 measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
