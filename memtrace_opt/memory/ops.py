"""Operations: the named steps of a memory system, each a `dspy.Module` so the trace hook sees every call.

* `Operation` is any step (chunking, store writes, search, trimming). Subclasses set `op_name` (stable, e.g.
  `rag.retrieve`) and implement `run(**inputs) -> dspy.Prediction`.
* `LMOperation` is a step that asks the task LM through one `dspy.Predict` over its own Signature class; the
  Signature's instruction is the prompt an optimizer may rewrite. A reply that does not parse is retried once,
  then the op returns its fallback outputs with `error` set: the failure is recorded and counted, the run goes on.

Replay: while a `ReplayControl` is active (a context variable), every operation that does not write the store
asks it first; it may return recorded outputs (content-addressed memo: same op, same inputs, same instruction)
or an output forced by the user. Store-writing ops always run, so the store is rebuilt faithfully.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any, ClassVar, Protocol, runtime_checkable

import dspy

from memtrace_opt.memory.roles import OpRole
from memtrace_opt.memory.values import content_key, from_jsonable, to_jsonable

__all__ = [
    "Operation",
    "LMOperation",
    "OperationFailed",
    "ReplayControl",
    "ScopingControl",
    "ACTIVE_REPLAY",
    "is_operation",
]

log = logging.getLogger(__name__)


class OperationFailed(RuntimeError):
    """The LM call behind an operation failed for good (no parseable reply after a retry, or a server error)."""


class ReplayControl(Protocol):
    """Consulted by operations during an executable replay.

    `lookup` returns the JSON outputs the op must return instead of running (a forced output, or a recorded
    output whose content key matches), or None to run live. It must not raise. `source` says why, for the
    trace: "forced" or "memo".

    A control may also scope a run (`ScopingControl`): asked after `lookup` found nothing, its `skips(op, inputs)`
    says whether the call is outside the replay's scope; a skipped call returns the op's `skipped_outputs()`,
    marked "scoped" (a replay that re-runs only the calls of a question's evidence, `optimizers/gates/settings.py`).
    """

    def lookup(self, op: Operation, key: str) -> tuple[dict[str, Any], str] | None: ...


@runtime_checkable
class ScopingControl(ReplayControl, Protocol):
    def skips(self, op: Operation, inputs: dict[str, Any]) -> bool: ...


ACTIVE_REPLAY: ContextVar[ReplayControl | None] = ContextVar("memtrace_active_replay", default=None)


def is_operation(obj: object) -> bool:
    return isinstance(obj, Operation)


class Operation(dspy.Module):
    """One named step of a memory system. Subclasses implement `run`."""

    op_name: ClassVar[str] = ""
    #: True for ops that write the store: they always run, and cannot be memoized or forced.
    writes_store: ClassVar[bool] = False
    #: What the op does in a memory's life (`memory/roles.py`); None: undeclared (guessed from the name where
    #: a role is needed, with a warning).
    role: ClassVar[OpRole | None] = None

    def forward(self, **inputs: Any) -> dspy.Prediction:
        control = ACTIVE_REPLAY.get()
        if control is not None and not self.writes_store:
            found = control.lookup(self, self.content_key(inputs))
            if found is None and isinstance(control, ScopingControl) and control.skips(self, inputs):
                found = to_jsonable(self.skipped_outputs()), "scoped"
            if found is not None:
                outputs, source = found
                prediction = dspy.Prediction(**from_jsonable(outputs))
                prediction._memtrace_replayed = source
                return prediction
        return self.run(**inputs)

    def skipped_outputs(self) -> dict[str, Any]:
        """What the op returns when a scoped replay skips it: for an LM-backed op, each output field empty (a list
        `[]`, a text `""`, a flag `False`), as when its LM call fails; a plain op is never skipped."""
        return {"error": None}

    def run(self, *args: Any, **inputs: Any) -> dspy.Prediction:  # pragma: no cover - abstract
        """Subclasses declare their own named inputs (the `*args` form lets type checkers accept that)."""
        raise NotImplementedError

    @property
    def instruction(self) -> str | None:
        """The instruction in force for an LM-backed op, else None."""
        return None

    def content_key(self, inputs: dict[str, Any]) -> str:
        """Content address of a call: op name, instruction (and demos) in force, JSON inputs."""
        return content_key(self.op_name, self.instruction, self._demos(), to_jsonable(inputs))

    def _demos(self) -> list[Any]:
        return []


class LMOperation(Operation):
    """An operation that asks the LM through one `dspy.Predict` over `signature`."""

    signature: ClassVar[type[dspy.Signature]]
    #: Whether its LM calls are DSPy adapter prompts of `signature`, which an optimizer's gate can re-render under
    #: another instruction to re-run one recorded call; False for an op whose prompt another library builds.
    adapter_prompt: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.predict = dspy.Predict(self.signature)

    @property
    def instruction(self) -> str:
        return self.predict.signature.instructions

    def _demos(self) -> list[Any]:
        return [to_jsonable(dict(d)) for d in (self.predict.demos or [])]

    def skipped_outputs(self) -> dict[str, Any]:
        empty = {list: [], str: "", bool: False, dict: {}, int: 0, float: 0.0}
        out: dict[str, Any] = {}
        for name, field in self.predict.signature.output_fields.items():
            kind = getattr(field.annotation, "__origin__", field.annotation)
            out[name] = empty.get(kind) if isinstance(kind, type) else None
        return {**out, "error": None}

    def ask(self, **inputs: Any) -> dspy.Prediction:
        """One LM call; an unparseable reply is retried once (bypassing the cache), then OperationFailed."""
        from dspy.utils.exceptions import AdapterParseError

        try:
            return self.predict(**inputs)
        except AdapterParseError as first:
            log.info("%s: unparseable reply, retrying once: %s", self.op_name, _short(first))
            try:
                return self.predict(**inputs, config={"rollout_id": 1})
            except AdapterParseError as second:
                raise OperationFailed(f"{self.op_name}: reply did not parse twice: {_short(second)}") from second
            except Exception as second:  # noqa: BLE001 - a server error on the retry
                raise OperationFailed(f"{self.op_name}: {type(second).__name__}: {_short(second)}") from second
        except Exception as error:  # noqa: BLE001 - timeouts, connection errors after the LM's own retries
            raise OperationFailed(f"{self.op_name}: {type(error).__name__}: {_short(error)}") from error


def _short(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
