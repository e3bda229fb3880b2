"""A deterministic LM engine for tests: it reads DSPy's prompt and answers through registered skills.

    engine = FakeEngine(skills=[Skill(outputs=("facts",), fn=lambda call: {"facts": ["a", "b"]})])
    with dspy.context(lm=fake_lm(engine=engine)):
        program(...)

The engine parses the ChatAdapter (or JSONAdapter) prompt into a `FakeCall` (instruction, input
values, output fields, raw messages), hands it to the first skill whose `outputs` are all requested,
and formats the returned values the way the adapter expects. With no matching skill every output
field gets a deterministic placeholder derived from the inputs, so any program runs. A skill can
raise `FakeReply(text)` to send raw (for example unparseable) text, or `FakeTimeout()` to fail the
call the way a server timeout does.

A slowed engine (`prompt_token_seconds`, `completion_token_seconds`) sleeps that long per prompt and per
completion token of each call: a model of a known speed, for tests of timings and time estimates.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from memtrace_opt.lm.chat_prompt import parse_prompt

DEFAULT_SKILL = "default"


@dataclass(frozen=True)
class FakeCall:
    """One request as a skill sees it. `messages` are the raw `{role, content}` dicts, system first;
    `max_tokens` the reply limit the caller asked for (None: the LM's default)."""

    instruction: str
    inputs: dict[str, str]
    output_fields: tuple[str, ...]
    messages: tuple[dict, ...]
    max_tokens: int | None = None


SkillFn = Callable[[FakeCall], Mapping[str, Any]]


@dataclass(frozen=True)
class Skill:
    """Answers requests whose output fields include all of `outputs` (and that `when`, if given, accepts: a
    prompt no DSPy adapter wrote has no output fields, so its skill says by `when` which prompts are its own).
    `name` defaults to the outputs."""

    outputs: tuple[str, ...]
    fn: SkillFn
    name: str = ""
    when: Callable[[FakeCall], bool] | None = None

    @property
    def label(self) -> str:
        return self.name or "+".join(self.outputs)


class FakeReply(Exception):  # noqa: N818 - raised by skills as a control signal, not an error
    """Raised by a skill to reply with `text` verbatim (e.g. text no adapter can parse)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class FakeTimeout(Exception):  # noqa: N818
    """Raised by a skill to make the call fail with the timeout error a real server produces."""

    def __init__(self, message: str = "fake request timed out") -> None:
        super().__init__(message)
        self.message = message


def render_value(value: Any) -> str:
    """A value as a ChatAdapter field: lists/dicts as JSON, bools as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def placeholder(field_name: str, kind: str, inputs: Mapping[str, str]) -> Any:
    """A deterministic value of the printed type `kind`, derived from the inputs."""
    digest = hashlib.sha256(json.dumps(dict(inputs), sort_keys=True).encode()).hexdigest()
    kind = kind.strip()
    if kind == "bool":
        return False
    if kind == "int":
        return int(digest[:4], 16) % 100
    if kind == "float":
        return round(int(digest[:4], 16) / 65535, 3)
    if kind.startswith(("list", "tuple", "set")):
        return []
    if kind.startswith("dict"):
        return {}
    literal = re.match(r"Literal\[\s*(['\"])(.*?)\1", kind)
    if literal:
        return literal.group(2)
    return f"fake {field_name} {digest[:8]}"


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    return system if isinstance(system, str) else "".join(getattr(p, "text", "") or "" for p in system)


def _count_tokens(texts: Sequence[str]) -> int:
    return sum(len(text.split()) for text in texts)


@dataclass
class FakeEngine:
    """A dspy engine (complete/stream/close) that answers through skills; thread-safe.

    `calls` lists every FakeCall in arrival order; `counts` counts calls per skill label
    ("default" for the placeholder answer). `prompt_token_seconds` / `completion_token_seconds` (default 0: no
    wait) make each call sleep that long per token it reads / writes (tokens as the engine counts them: words).
    """

    skills: list[Skill] = field(default_factory=list)
    model: str = "fake"
    prompt_token_seconds: float = 0.0
    completion_token_seconds: float = 0.0
    calls: list[FakeCall] = field(default_factory=list, init=False)
    counts: Counter[str] = field(default_factory=Counter, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def on(self, outputs: Sequence[str], fn: SkillFn | None = None, *, name: str = "",
           when: Callable[[FakeCall], bool] | None = None) -> Any:
        """Register a skill; without `fn` it returns a decorator."""

        def register(skill_fn: SkillFn) -> SkillFn:
            with self._lock:
                self.skills.append(Skill(outputs=tuple(outputs), fn=skill_fn, name=name, when=when))
            return skill_fn

        return register(fn) if fn is not None else register

    @property
    def cache_identity(self) -> str:
        """What a reply cache keys this engine's replies by (`memtrace_opt.lm.reply_cache`)."""
        return f"fake:{self.model}"

    def calls_for(self, output_field: str) -> list[FakeCall]:
        with self._lock:
            return [c for c in self.calls if output_field in c.output_fields]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.counts.clear()

    def _pick(self, call: FakeCall) -> Skill | None:
        with self._lock:
            skills = list(self.skills)
        requested = set(call.output_fields)
        return next((s for s in skills if set(s.outputs) <= requested and (s.when is None or s.when(call))), None)

    def complete(self, request: Any) -> Response:
        system = _system_text(request.system)
        head: tuple[dict[str, str], ...] = ({"role": "system", "content": system},) if system else ()
        messages = head + tuple({"role": str(m.role), "content": m.text or ""} for m in request.messages)
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        parsed = parse_prompt(system, last_user)
        call = FakeCall(parsed.instruction, parsed.inputs, parsed.output_fields, messages,
                        getattr(request.config, "max_tokens", None))
        skill = self._pick(call)
        with self._lock:
            self.calls.append(call)
            self.counts[skill.label if skill else DEFAULT_SKILL] += 1
        text = self._reply(call, skill, parsed.output_types, parsed.json_output)
        prompt_tokens = _count_tokens([m["content"] for m in messages])
        completion_tokens = _count_tokens([text])
        delay = prompt_tokens * self.prompt_token_seconds + completion_tokens * self.completion_token_seconds
        if delay > 0:
            time.sleep(delay)
        return Response(
            id=None,
            model=self.model,
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
        )

    def _reply(self, call: FakeCall, skill: Skill | None, types: dict[str, str], as_json: bool) -> str:
        values: dict[str, Any] = {}
        if skill is not None:
            try:
                values = dict(skill.fn(call))
            except FakeReply as reply:
                return reply.text
            except FakeTimeout as timeout:
                raise dspy.lm15.TimeoutError(timeout.message, provider="fake", retry_after=0.0) from None
        for name in call.output_fields:
            if name not in values:
                values[name] = placeholder(name, types.get(name, "str"), call.inputs)
        ordered = {name: values[name] for name in call.output_fields}
        if as_json:
            return json.dumps(ordered, ensure_ascii=False, indent=2)
        blocks = [f"[[ ## {name} ## ]]\n{render_value(value)}" for name, value in ordered.items()]
        return "\n\n".join([*blocks, "[[ ## completed ## ]]"])

    def stream(self, request: Any) -> Iterator[Any]:
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        return None

    def __deepcopy__(self, memo: dict[int, Any]) -> FakeEngine:
        """Engines are borrowed: a deep-copied program or LM keeps recording into this engine."""
        return self


def fake_lm(
    skills: Sequence[Skill] | None = None,
    *,
    engine: FakeEngine | None = None,
    name: str = "fake/test",
    num_retries: int = 0,
    cache: bool = False,
    **lm_kwargs: Any,
) -> dspy.LM:
    """A `dspy.LM` over a FakeEngine (given, or built from `skills`), uncached, no retries by default.

    The engine is reachable as `lm.engine`. With `cache=True` give each engine its own `name`:
    DSPy's cache key holds the model name, not the engine.
    """
    if engine is None:
        engine = FakeEngine(skills=list(skills or []))
    elif skills:
        for skill in skills:
            engine.on(skill.outputs, skill.fn, name=skill.name, when=skill.when)
    return dspy.LM(name, engine=engine, cache=cache, num_retries=num_retries, **lm_kwargs)


@contextmanager
def use_fake_lm(
    skills: Sequence[Skill] | None = None, *, engine: FakeEngine | None = None, **kwargs: Any
) -> Iterator[FakeEngine]:
    """Run the block with a fake LM as `dspy.settings.lm`; yields the engine to inspect calls."""
    lm = fake_lm(skills, engine=engine, **kwargs)
    with dspy.context(lm=lm):
        yield lm.engine
