"""`Models`: the dspy.LM of each role, built on first use, with one usage tracker for all of them."""

from __future__ import annotations

import threading
from typing import Any

from memtrace_opt.lm.reply_cache import ReplyCache
from memtrace_opt.lm.roles import ROLES, ModelRoles, build_lm
from memtrace_opt.lm.usage import RoleLM, UsageTracker


class Models:
    """Lazily built LMs by role: `models.task`, `.judge`, `.reflection`, `.attributor`; `models.usage`.

    Each role gets its own LM object (so usage is attributed per role) even when two roles share a
    spec; embedded roles share one loaded llama.cpp model per process. Tests pass `fake_engine` to
    serve every "fake" role from their own FakeEngine.
    """

    def __init__(self, roles: ModelRoles, *, usage: UsageTracker | None = None, fake_engine: Any = None) -> None:
        self.roles = roles
        self.usage = usage if usage is not None else UsageTracker()
        self._fake_engine = fake_engine
        self._lms: dict[str, RoleLM] = {}
        self._lock = threading.Lock()
        self.reply_cache: ReplyCache | None = None
        self._dspy_cache: dict[str, bool] = {}  # each role's DSPy cache flag before a reply cache was attached

    def use_replies(self, cache: ReplyCache | None) -> None:
        """Every role's LM serves requests it was sent before from `cache` and keeps new replies in it; None takes
        the reply cache away again. DSPy's own cache is off while one is attached (its key leaves the server and
        the engine out) and back as it was after."""
        with self._lock:
            self.reply_cache = cache
            for role, lm in self._lms.items():
                self._attach(role, lm)

    def _attach(self, role: str, lm: RoleLM) -> None:
        lm.reply_cache = self.reply_cache
        if self.reply_cache is not None:
            self._dspy_cache.setdefault(role, bool(lm.cache))
            lm.cache = False
        elif role in self._dspy_cache:
            lm.cache = self._dspy_cache.pop(role)

    @classmethod
    def from_roles(cls, roles: ModelRoles, **kwargs: Any) -> Models:
        return cls(roles, **kwargs)

    def get(self, role: str) -> RoleLM:
        """The LM for `role`, built on first use (ModelUnavailable if it cannot be served)."""
        spec = self.roles.spec(role)
        with self._lock:
            if role not in self._lms:
                self._lms[role] = build_lm(spec, role, usage=self.usage, fake_engine=self._fake_engine)
                if self.reply_cache is not None:
                    self._attach(role, self._lms[role])
            return self._lms[role]

    @property
    def task(self) -> RoleLM:
        return self.get("task")

    @property
    def judge(self) -> RoleLM:
        return self.get("judge")

    @property
    def reflection(self) -> RoleLM:
        return self.get("reflection")

    @property
    def attributor(self) -> RoleLM:
        return self.get("attributor")

    def names(self) -> dict[str, str]:
        """Model string by role (what the graph's `models` attribute records)."""
        return {role: self.roles.spec(role).model for role in ROLES}
