"""Model roles: which LM plays the task, the judge, the reflection (prompt rewriting) and the attributor.

A `ModelSpec.model` is any LiteLLM model string ("openai/gpt-4.1-mini", "ollama_chat/qwen2.5",
"openai/<name>" with `api_base` for a vLLM or llama.cpp server), "embedded[:...]" for the in-process
llama.cpp model, or "fake" for the deterministic FakeEngine. API keys are never stored: a spec names
the environment variable that holds one (`api_key_env`).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from memtrace_opt.errors import ConfigError, ModelUnavailable

ROLES = ("task", "judge", "reflection", "attributor")
FAKE = "fake"


@dataclass(frozen=True)
class ModelSpec:
    """How to reach one role's model. `extra` goes to `dspy.LM` (or the embedded engine: n_ctx and its levers)."""

    model: str = "embedded"
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """"embedded", "fake" or "litellm"."""
        from memtrace_opt.lm.embedded import is_embedded

        if is_embedded(self.model):
            return "embedded"
        return FAKE if self.model == FAKE or self.model.startswith(FAKE + "/") else "litellm"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "extra": dict(sorted(self.extra.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "models.task") -> ModelSpec:
        """Build a spec from config data, raising ConfigError naming `where.<key>` for a bad key or type."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(sorted(known))})")
        values = {k: v for k, v in data.items() if v is not None}
        checks: dict[str, tuple[type, ...]] = {
            "model": (str,), "api_base": (str,), "api_key_env": (str,),
            "temperature": (int, float), "max_tokens": (int,), "extra": (Mapping,),
        }
        for key, value in values.items():
            if not isinstance(value, checks[key]) or isinstance(value, bool):
                want = " or ".join(t.__name__ for t in checks[key])
                raise ConfigError(f"{where}.{key}: expected {want}, got {type(value).__name__} {value!r}")
        if "model" in values and not values["model"].strip():
            raise ConfigError(f"{where}.model: must not be empty")
        if "temperature" in values:
            values["temperature"] = float(values["temperature"])
        if "extra" in values:
            values["extra"] = dict(values["extra"])
        return cls(**values)


@dataclass(frozen=True)
class ModelRoles:
    """A ModelSpec per role; an unset role uses the task role's spec."""

    task: ModelSpec = field(default_factory=ModelSpec)
    judge: ModelSpec | None = None
    reflection: ModelSpec | None = None
    attributor: ModelSpec | None = None

    def spec(self, role: str) -> ModelSpec:
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; roles are {', '.join(ROLES)}")
        return getattr(self, role) or self.task

    def resolved(self) -> dict[str, ModelSpec]:
        return {role: self.spec(role) for role in ROLES}

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Every role, resolved (what ran), in ROLES order. Holds env var names, never keys."""
        return {role: spec.to_dict() for role, spec in self.resolved().items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, where: str = "models") -> ModelRoles:
        data = data or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping of role -> model spec")
        for role in data:
            if role not in ROLES:
                raise ConfigError(f"{where}.{role}: unknown model role (roles: {', '.join(ROLES)})")
        specs = {role: ModelSpec.from_dict(v, f"{where}.{role}") for role, v in data.items() if v is not None}
        return cls(**specs)


def _api_key(spec: ModelSpec, role: str) -> str | None:
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise ModelUnavailable(
                f"{role} model {spec.model}: environment variable {spec.api_key_env} is not set"
            )
        return key
    if spec.api_base and spec.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        return "unused"  # local OpenAI-compatible servers (vLLM, llama.cpp) accept any key
    return None


def server_cache_id(api_base: str, rollout_id: int | None = None) -> int:
    """The `rollout_id` an LM served at `api_base` gives DSPy, so that its cached replies are its server's own.

    DSPy's response cache keys a request by model name and messages and leaves `api_base` out: two servers under
    one name (a llama.cpp server and a vLLM one both serving "openai/qwen") would answer from each other's cache.
    `rollout_id` is DSPy's own way to keep cache entries of otherwise identical requests apart, stripped before
    the request is sent; a user's own `rollout_id` is folded in, not replaced."""
    text = api_base.strip().rstrip("/") + ("" if rollout_id is None else f"#rollout={rollout_id}")
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:6], "big")


def build_lm(spec: ModelSpec, role: str = "task", *, usage: Any = None, fake_engine: Any = None) -> Any:
    """A `RoleLM` (a dspy.LM) for `spec` playing `role`, recording into `usage` (a UsageTracker).

    Embedded: checks llama_cpp and the weights now (ModelUnavailable with the fix), loads on first call.
    Fake: uses `fake_engine` or a FakeEngine with the built-in systems' default skills. LiteLLM: api key from
    `api_key_env`; with an `api_base`, DSPy's cache is keyed by that server too (`server_cache_id`).
    """
    from memtrace_opt.lm.usage import RoleLM

    extra = dict(spec.extra)
    common: dict[str, Any] = {"role": role, "usage": usage, "temperature": spec.temperature,
                              "max_tokens": spec.max_tokens}
    if spec.kind == "embedded":
        from memtrace_opt.lm.embedded import EmbeddedEngine, EngineLevers

        # the extra keys the engine consumes: its context size and its levers
        engine_args = {k: extra.pop(k) for k in ("n_ctx", *EngineLevers.KEYS) if k in extra}
        try:
            levers = EngineLevers.from_mapping(engine_args)
        except ValueError as exc:
            raise ConfigError(f"models.{role}.extra.{exc}") from None
        n_ctx = engine_args.get("n_ctx", 8192)
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
            raise ConfigError(f"models.{role}.extra.n_ctx: expected a whole number >= 256, got {n_ctx!r}")
        local = EmbeddedEngine(spec.model, n_ctx=n_ctx, levers=levers)
        local.prepare()
        return RoleLM(local.lm_name, engine=local, **common, **extra)
    if spec.kind == FAKE:
        from memtrace_opt.lm.embedded import EngineLevers
        from memtrace_opt.testing.fake_lm import FakeEngine
        from memtrace_opt.testing.skills import default_skills

        for lever in ("n_ctx", *EngineLevers.KEYS):  # the fake stands in for the embedded model: its engine's keys
            extra.pop(lever, None)  # (a config written for it, run with --lm fake) mean nothing to the fake engine
        name = spec.model if "/" in spec.model else f"fake/{role}"
        extra.setdefault("cache", False)
        extra.setdefault("num_retries", 0)
        engine = fake_engine or FakeEngine(skills=default_skills())
        return RoleLM(name, engine=engine, **common, **extra)
    key = _api_key(spec, role)
    client: dict[str, Any] = {k: v for k, v in (("api_base", spec.api_base), ("api_key", key)) if v is not None}
    if spec.api_base:
        extra["rollout_id"] = server_cache_id(spec.api_base, extra.get("rollout_id"))
    from dspy.utils.exceptions import LMConfigurationError

    try:
        with warnings.catch_warnings():
            # DSPy warns once per LM that a rollout_id changes no reply at temperature 0: true, and beside the
            # point here (it keeps the servers' cache entries apart)
            warnings.filterwarnings("ignore", message="rollout_id has no effect", category=UserWarning)
            return RoleLM(spec.model, **common, **client, **extra)
    except (ValueError, TypeError, LMConfigurationError) as exc:
        raise ConfigError(f"models.{role}: {exc}") from exc


PING = "Reply with the single word OK."
PING_MAX_TOKENS = 16
CHECK_TIMEOUT_S = 30.0


def check_model(spec: ModelSpec, role: str = "task", *, timeout: float = CHECK_TIMEOUT_S) -> None:
    """Make sure `spec` can answer before a job spends its time: one tiny uncached call (at most
    `PING_MAX_TOKENS` tokens, no retries). Raises ModelUnavailable naming the role, the model and what failed.

    A server is given at most `timeout` seconds; the embedded model is prepared (llama_cpp importable, the weights
    assembled and verified), loaded and asked too, with no time limit (an in-process engine takes no client
    timeout, and the load is the job's own first step). The probe LM keeps its own usage tracker, so the call
    counts in no job's usage or LM-call budget. The fake model is not called (tests script its calls).
    """
    from memtrace_opt.redact import redact_text

    if spec.kind == FAKE:
        return
    probe = replace(spec, max_tokens=min(spec.max_tokens, PING_MAX_TOKENS),
                    extra={**spec.extra, "cache": False, "num_retries": 0})
    where = f" at {spec.api_base}" if spec.api_base else ""
    lm = build_lm(probe, role)  # no `usage`: a tracker of its own, never a job's
    limit = {} if spec.kind == "embedded" else {"timeout": timeout}
    try:
        lm(PING, **limit)
    except Exception as exc:  # noqa: BLE001 - any failure of the probe is the user's model setup
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if len(detail) > 300:
            detail = detail[:299] + "…"
        raise ModelUnavailable(redact_text(f"{role} model {spec.model}{where} did not answer a test call: {detail}")) from None


def check_roles(roles: ModelRoles, needed: tuple[str, ...] = ROLES, *, timeout: float = CHECK_TIMEOUT_S) -> None:
    """`check_model` for each role in `needed`, once per distinct spec (roles sharing the task's spec cost one call)."""
    seen: list[ModelSpec] = []
    for role in needed:
        spec = roles.spec(role)
        if spec in seen:
            continue
        seen.append(spec)
        check_model(spec, role, timeout=timeout)
