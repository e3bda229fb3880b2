"""A plain `dspy.Module` (a `dspy.Predict`, a `dspy.ChainOfThought`, a module of your own) as an operation,
without rewriting it:

    self.write = as_op(dspy.ChainOfThought(WriteNote), "notes.write")
    note = self.write(new_messages=text, session_date=date).facts      # called like the module itself

The wrapped module keeps its own attribute name under the op (`write.module.predict` for the example), so a
saved program.json holds its state there, and that predictor is the one attribution blames and the optimizer
rewrites: its instruction and demos are the op's, for the trace and for replay. A module with exactly one
predictor becomes an LM-backed op; one without predictors a plain op; one with several is refused (wrap each
step as its own op, so each has its own blame and its own prompt).

A call that raises (after one retry of a reply that did not parse) raises `OperationFailed`, or, when
`fallback` is given, returns those outputs with `error` set: the failure is recorded and counted, the run goes on.
"""

from __future__ import annotations

from typing import Any

import dspy

from memtrace_opt.errors import ConfigError
from memtrace_opt.memory.ops import LMOperation, Operation, OperationFailed
from memtrace_opt.memory.roles import OpRole

__all__ = ["ModuleOp", "PlainModuleOp", "as_op"]


def _call(op: Operation, module: dspy.Module, fallback: dict[str, Any] | None, inputs: dict[str, Any]) -> dspy.Prediction:
    from dspy.utils.exceptions import AdapterParseError

    try:
        try:
            out = module(**inputs)
        except AdapterParseError:
            out = module(**inputs, config={"rollout_id": 1})  # once more, past the cache
    except Exception as error:  # noqa: BLE001 - parse errors twice, timeouts, a bug in the module
        message = f"{op.op_name}: {type(error).__name__}: {' '.join(str(error).split())[:300]}"
        if fallback is None:
            raise OperationFailed(message) from error
        return dspy.Prediction(**fallback, error=message)
    if isinstance(out, dspy.Prediction):
        return out
    if isinstance(out, dict):
        return dspy.Prediction(**out)
    return dspy.Prediction(output=out)


class ModuleOp(LMOperation):
    """An LM-backed op around a module with one predictor (see the module docstring)."""

    def __init__(self, module: dspy.Module, op_name: str, *, writes_store: bool = False,
                 fallback: dict[str, Any] | None = None, role: OpRole | None = None) -> None:
        Operation.__init__(self)  # no Predict of its own: the module's predictor is the op's
        self.module = module
        setattr(self, "op_name", op_name)  # noqa: B010 - an instance's name shadows the class default
        setattr(self, "writes_store", writes_store)  # noqa: B010
        setattr(self, "role", role)  # noqa: B010
        self.fallback = fallback

    @property
    def predict(self) -> dspy.Predict:  # type: ignore[override]
        """The wrapped module's predictor (looked up each time: an optimizer may have replaced the module)."""
        return self.module.named_predictors()[0][1]

    def run(self, *args: Any, **inputs: Any) -> dspy.Prediction:
        return _call(self, self.module, self.fallback, inputs)


class PlainModuleOp(Operation):
    """A non-LM op around a module without predictors (a retriever, a formatter, a store write)."""

    def __init__(self, module: dspy.Module, op_name: str, *, writes_store: bool = False,
                 fallback: dict[str, Any] | None = None, role: OpRole | None = None) -> None:
        super().__init__()
        self.module = module
        setattr(self, "op_name", op_name)  # noqa: B010
        setattr(self, "writes_store", writes_store)  # noqa: B010
        setattr(self, "role", role)  # noqa: B010
        self.fallback = fallback

    def run(self, *args: Any, **inputs: Any) -> dspy.Prediction:
        return _call(self, self.module, self.fallback, inputs)


def as_op(module: dspy.Module, op_name: str, *, writes_store: bool = False,
          fallback: dict[str, Any] | None = None, role: OpRole | str | None = None) -> ModuleOp | PlainModuleOp:
    """`module` as an operation named `op_name` (stable, `<system>.<step>`; `<system>.answer` for the answering
    op). `writes_store` for a module that writes the store (it then always runs, never replayed from a record).
    `role` says what the op does in a memory's life (`OpRole` or its value: "forms", "updates", "deletes",
    "retrieves", "answers", "none"); without it the role is guessed from the name where one is needed.
    Raises ConfigError for anything but a plain module, a module with several predictors, or an unknown role."""
    if not isinstance(module, dspy.Module):
        raise ConfigError(f"{op_name}: as_op wraps a dspy.Module, got {type(module).__name__}")
    if isinstance(module, Operation):
        raise ConfigError(f"{op_name}: {type(module).__name__} is an operation already; call it directly")
    if not op_name or "." not in op_name:
        raise ConfigError(f"op name {op_name!r}: use a stable dotted name such as 'notes.write'")
    try:
        declared = OpRole.parse(role)
    except ValueError as error:
        raise ConfigError(f"{op_name}: {error}") from None
    predictors = [name for name, _ in module.named_predictors()]
    if len(predictors) > 1:
        raise ConfigError(
            f"{op_name}: {type(module).__name__} has {len(predictors)} predictors ({', '.join(predictors)}); "
            "wrap each LM step as its own op so each gets its own blame and prompt"
        )
    if not predictors:
        return PlainModuleOp(module, op_name, writes_store=writes_store, fallback=fallback, role=declared)
    return ModuleOp(module, op_name, writes_store=writes_store, fallback=fallback, role=declared)
