"""The schema of a YAML config file: every key a command reads, with its type. One schema for every command.

    system: rag                 # run, optimize, compare
    data: locomo:conv-26
    sessions: 1-3               # or a single session: 2
    categories: [single-hop]
    limit: 20
    out: runs/rag-1
    program: runs/opt/program.json
    judge: true
    threads: 2
    seed: 0                     # optimize, compare: the splits' and the minibatches'
    settings: {top_k: 8}        # the system's own settings (checked against its Config)
    train: conv-26              # optimize, compare; or a list: [conv-26, conv-30]
    val: conv-30
    test: conv-41
    split: 0.4,0.3,0.3
    per_split: 20
    optimize: {rounds: 4, patience: 2, ..., attribution: graphtrace, judge: false, storage: null, preset: null}
    models: {task: {model: embedded}, judge: {...}, reflection: {...}, attributor: {...}}

An unknown key (with the close name it was probably meant to be), or a value of the wrong type, is a one-line
ConfigError naming the key and the type it wants.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memtrace_opt.errors import ConfigError

__all__ = ["Bounds", "ConfigFile", "key_bounds", "validate_config", "validate_program_settings"]

_Ids = Union[str, list[str]]  # noqa: UP007 - pydantic reads these at runtime on Python 3.10 too


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OptimizeSection(_Strict):
    """The `optimize:` keys: the loop's flags by their flag names, and the optimizer's choices. The bounds are
    the settings' own (`LoopSettings` and its parts), so a bad value is named here, as a config key."""

    rounds: Optional[int] = Field(None, ge=1)  # noqa: UP045
    patience: Optional[int] = Field(None, ge=1)  # noqa: UP045
    candidates: Optional[int] = Field(None, ge=1)  # noqa: UP045
    minibatch: Optional[int] = Field(None, ge=1)  # noqa: UP045
    budget: Optional[int] = Field(None, ge=1)  # noqa: UP045
    time_budget: Optional[float] = Field(None, gt=0)  # noqa: UP045
    local_check: Optional[bool] = None  # noqa: UP045
    demos: Optional[int] = Field(None, ge=0)  # noqa: UP045
    validate_ties: Optional[bool] = None  # noqa: UP045
    min_val_gain: Optional[float] = Field(None, ge=0, lt=1)  # noqa: UP045
    min_val_questions: Optional[int] = Field(None, ge=1)  # noqa: UP045
    demo_pool: Optional[int] = Field(None, ge=0)  # noqa: UP045
    demo_budget: Optional[int] = Field(None, ge=1)  # noqa: UP045
    compact_demos: Optional[bool] = None  # noqa: UP045
    pattern_rules: Optional[bool] = None  # noqa: UP045
    threads: Optional[int] = Field(None, ge=1)  # noqa: UP045
    repairs: Optional[int] = Field(None, ge=0)  # noqa: UP045
    scoped_replay: Optional[bool] = None  # noqa: UP045
    local_objective: Optional[bool] = None  # noqa: UP045
    local_margin: Optional[int] = Field(None, ge=1)  # noqa: UP045
    local_calls: Optional[int] = Field(None, ge=1)  # noqa: UP045
    validate_top: Optional[int] = Field(None, ge=1)  # noqa: UP045
    settings: Optional[bool] = None  # noqa: UP045
    settings_trials: Optional[int] = Field(None, ge=1)  # noqa: UP045
    cost_limit: Optional[float] = Field(None, ge=1)  # noqa: UP045
    attribution: Optional[str] = None  # noqa: UP045
    judge: Optional[bool] = None  # noqa: UP045
    storage: Optional[str] = None  # noqa: UP045
    preset: Optional[str] = None  # noqa: UP045


class ConfigFile(_Strict):
    """A whole config file. `models` is checked by `ModelRoles.from_dict`, `settings` against the system."""

    schema_version: Optional[int] = None  # noqa: UP045
    system: Optional[str] = None  # noqa: UP045
    data: Optional[str] = None  # noqa: UP045
    sessions: Optional[Union[str, int]] = None  # noqa: UP007,UP045
    categories: Optional[_Ids] = None  # noqa: UP045
    limit: Optional[int] = Field(None, ge=1)  # noqa: UP045
    out: Optional[str] = None  # noqa: UP045
    program: Optional[str] = None  # noqa: UP045
    judge: Optional[bool] = None  # noqa: UP045
    threads: Optional[int] = Field(None, ge=1)  # noqa: UP045
    seed: Optional[int] = None  # noqa: UP045
    settings: Optional[dict[str, Any]] = None  # noqa: UP045
    train: Optional[_Ids] = None  # noqa: UP045
    val: Optional[_Ids] = None  # noqa: UP045
    test: Optional[_Ids] = None  # noqa: UP045
    split: Optional[str] = None  # noqa: UP045
    per_split: Optional[int] = Field(None, ge=1)  # noqa: UP045
    optimize: Optional[OptimizeSection] = None  # noqa: UP045
    models: Optional[dict[str, Any]] = None  # noqa: UP045


class Bounds(NamedTuple):
    """A numeric key's least and greatest values (None: unbounded), each inclusive unless `low_open`/`high_open`."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def refusal(self, value: float) -> str | None:
        """Why `value` is out of bounds, in pydantic's words (typer's for a closed bound), else None."""
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return f"Input should be greater than {'' if self.low_open else 'or equal to '}{self.low:g}"
        if self.high is not None and not (value < self.high if self.high_open else value <= self.high):
            return f"Input should be less than {'' if self.high_open else 'or equal to '}{self.high:g}"
        return None


_SECTIONS: dict[str, type[BaseModel]] = {"": ConfigFile, "optimize": OptimizeSection}


def key_bounds(key: str) -> Bounds:
    """The bounds the schema puts on a numeric key, by its dotted path (`per_split`, `optimize.threads`): the one
    place a count's least meaningful value is declared, for the config file and the flags alike. `Bounds()` for a
    key without bounds, or one the schema does not know."""
    section, _, name = key.rpartition(".")
    model = _SECTIONS.get(section)
    field = model.model_fields.get(name) if model is not None else None
    rules = {kind: getattr(rule, kind) for rule in (field.metadata if field is not None else ())
             for kind in ("ge", "gt", "le", "lt") if getattr(rule, kind, None) is not None}  # annotated_types' Ge, ...
    low, high = rules.get("ge", rules.get("gt")), rules.get("le", rules.get("lt"))
    return Bounds(low, high, low_open="gt" in rules, high_open="lt" in rules)


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "string": "a string",
               "dict": "a mapping", "list": "a list", "model": "a mapping"}


def _known(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the schema knows at `loc` (the path of the unknown key's parent)."""
    for part in loc:
        field = model.model_fields.get(str(part))
        inner = getattr(field, "annotation", None) if field is not None else None
        nested = next((a for a in getattr(inner, "__args__", (inner,)) if isinstance(a, type)
                       and issubclass(a, BaseModel)), None)
        if nested is None:
            return []
        model = nested
    return sorted(model.model_fields)


def _expected(error: Any) -> str:
    kind = str(error.get("type", ""))
    context = error.get("ctx") or {}
    if "ge" in context or "greater_than_equal" in kind:
        return f"a number >= {context.get('ge')}"
    if "le" in context or "less_than_equal" in kind:
        return f"a number <= {context.get('le')}"
    if "gt" in context:
        return f"a number > {context['gt']}"
    if "lt" in context:
        return f"a number < {context['lt']}"
    for word, text in _TYPE_WORDS.items():
        if kind.startswith(word):
            return text
    return str(error.get("msg", "another value")).lower()


def _message(where: str, error: Any, known: list[str]) -> str:
    loc = tuple(error.get("loc", ()))
    # pydantic names the union member in the path (`sessions.int`): keep the keys the user wrote
    key = ".".join(str(p) for p in loc if str(p) not in ("str", "int", "list[str]", "float", "bool"))
    if error.get("type") == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})" if known else ""
        return f"{where}{key}: unknown key{hint}"
    value = error.get("input")
    return f"{where}{key}: expected {_expected(error)}, got {type(value).__name__} {value!r}"


def validate_config(data: Mapping[str, Any], where: str = "") -> ConfigFile:
    """`data` (a config file's mapping) checked against `ConfigFile`; ConfigError names the first bad key."""
    try:
        return ConfigFile.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(error.get("loc", ()))
        raise ConfigError(_message(f"{where}: " if where else "", error, _known(ConfigFile, loc[:-1]))) from None


def validate_program_settings(system: str, settings: Mapping[str, Any] | None, where: str = "settings") -> dict[str, Any]:
    """A system's `settings` checked against its Config dataclass: unknown keys (with the close name) and wrong
    types are a ConfigError naming `where.<key>`. Returns the settings with their values converted."""
    from pydantic import TypeAdapter

    from memtrace_opt.programs.registry import load_program_class

    settings = dict(settings or {})
    config_cls = load_program_class(system).Config
    known = sorted(f.name for f in dataclasses.fields(config_cls))
    for key in settings:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
            raise ConfigError(f"{where}.{key}: unknown setting of {system}{hint}")
    try:
        checked = TypeAdapter(config_cls).validate_python(settings)
    except ValidationError as exc:
        raise ConfigError(_message(f"{where}.", exc.errors()[0], known)) from None
    return {key: getattr(checked, key) for key in settings}
