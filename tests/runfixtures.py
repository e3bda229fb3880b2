"""A small LoCoMo file with several conversations, and fake engines that fail or stop on cue, for the tests of
the run contract (locking, resume, interrupts, failing models)."""

from __future__ import annotations

import json
from pathlib import Path

from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.testing.fake_lm import FakeEngine, FakeTimeout
from memtrace_opt.testing.skills import default_skills

FAKE = ModelRoles(task=ModelSpec(model="fake"))
TEXTS = ["I adopted a kitten named Luna.", "I work as a carpenter in Lisbon.", "My sister studies biology."]


def write_conversations(path: Path, sample_ids: tuple[str, ...] = ("c-a", "c-b", "c-c"), *,
                        text: str | None = None) -> Path:
    """A LoCoMo file: one session of three turns and a fourth naming the sample id (the same session in two
    conversations would make them one unit of the splits) and two questions per sample id (`text` replaces turn 1)."""
    records = []
    for sample_id in sample_ids:
        turns = [{"speaker": "Alice" if n % 2 else "Bob", "dia_id": f"D1:{n}", "text": t}
                 for n, t in enumerate([text or TEXTS[0], *TEXTS[1:], f"({sample_id})"], start=1)]
        records.append({
            "sample_id": sample_id,
            "conversation": {"speaker_a": "Alice", "speaker_b": "Bob", "session_1_date_time": "1:00 pm on 8 May, 2023",
                             "session_1": turns},
            "qa": [{"question": "What is the kitten's name?", "answer": "Luna", "evidence": ["D1:1"], "category": 4},
                   {"question": "What does Bob work as?", "answer": "carpenter", "evidence": ["D1:2"], "category": 4}],
        })
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


class CallGate:
    """Wraps a FakeEngine: after `allow` calls, the next call raises `error` (KeyboardInterrupt, FakeTimeout...)."""

    def __init__(self, allow: int | None = None, error: BaseException | type[BaseException] = KeyboardInterrupt,
                 *, always: bool = False) -> None:
        self.inner = FakeEngine(skills=default_skills())
        self.allow = allow
        self.error = error
        self.always = always
        self.calls = 0

    def complete(self, request):
        self.calls += 1
        if self.allow is not None and self.calls > self.allow and (self.always or self.calls == self.allow + 1):
            raise self.error() if isinstance(self.error, type) else self.error
        return self.inner.complete(request)

    def stream(self, request):
        return self.inner.stream(request)

    def close(self) -> None:
        self.inner.close()

    def __deepcopy__(self, memo):
        return self


def failing_models() -> Models:
    """Every call times out, the way a dead server's does."""
    return Models(FAKE, fake_engine=CallGate(0, FakeTimeout, always=True))


def stopping_models(allow: int) -> tuple[Models, CallGate]:
    """Calls go through until `allow` have, then one Ctrl-C."""
    gate = CallGate(allow, KeyboardInterrupt)
    return Models(FAKE, fake_engine=gate), gate
