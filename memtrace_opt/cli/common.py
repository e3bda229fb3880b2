"""Helpers shared by commands: model-role flags added to any command by a decorator, the data slice the
slicing flags name, and console output."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from rich.console import Console

from memtrace_opt.cli.options import (
    AttributorApiBaseOption,
    AttributorLmOption,
    ConfigOption,
    JudgeApiBaseOption,
    JudgeLmOption,
    LmApiBaseOption,
    LmOption,
    ReflectionApiBaseOption,
    ReflectionLmOption,
    roles_from_cli,
)
from memtrace_opt.data import DEFAULT_GOLD, DataSlice, parse_sessions

__all__ = ["with_model_flags", "console", "data_slice", "MODEL_FLAGS"]

F = TypeVar("F", bound=Callable[..., Any])

MODEL_FLAGS: dict[str, Any] = {
    "lm": LmOption,
    "lm_api_base": LmApiBaseOption,
    "judge_lm": JudgeLmOption,
    "judge_api_base": JudgeApiBaseOption,
    "reflection_lm": ReflectionLmOption,
    "reflection_api_base": ReflectionApiBaseOption,
    "attributor_lm": AttributorLmOption,
    "attributor_api_base": AttributorApiBaseOption,
}


def with_model_flags(func: F) -> F:
    """Adds --config and the model-role flags to a typer command whose function takes `roles` and `config`.

    The wrapped function receives `roles` (defaults < --config file < flags) and the config path as
    `config`; it keeps its own options. One definition of the flags serves every command.
    """
    hints = get_type_hints(func, include_extras=True)
    signature = inspect.signature(func)
    own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
           if p.name not in ("roles", "config")]
    added = [inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ConfigOption)]
    added += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
              for name, annotation in MODEL_FLAGS.items()]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = {name: kwargs.pop(name, None) for name in MODEL_FLAGS}
        config_path: Path | None = kwargs.pop("config", None)
        return func(*args, roles=roles_from_cli(config_path, **flags), config=config_path, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**{p.name: p.annotation for p in own}, **{p.name: p.annotation for p in added}}
    del wrapper.__wrapped__  # typer must read the new signature, not the original's
    return wrapper  # type: ignore[return-value]


def data_slice(
    sessions: str | None = None,
    categories: Any = None,
    limit: int | None = None,
    samples: Any = None,
    gold: str | None = None,
) -> DataSlice:
    """The DataSlice of the slicing flags: `--sessions A-B`, repeated `--category`, `--limit N`, repeated
    `--sample ID` (None or empty: no filter), and `--gold` (None: the default, corrected)."""
    session_range = parse_sessions(str(sessions)) if sessions else None
    return DataSlice(
        sample_ids=tuple(samples) if samples else None,
        sessions=(session_range.first, session_range.last) if session_range else None,
        categories=tuple(categories) if categories else None,
        limit=limit,
        gold=gold or DEFAULT_GOLD,
    )


def console(stderr: bool = False) -> Console:
    """The rich console for command output (no colour when NO_COLOR is set or output is not a terminal)."""
    return Console(stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")))
