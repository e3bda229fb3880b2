"""YAML run configuration: flags override file values, which override defaults.

A config is a plain nested dict. `load_config` reads and checks a file, `merge` layers one dict over
another (None in the overlay means "not given"), `roles_from_config` builds the model roles, and
`dump_config` writes deterministic YAML with secrets removed. The models section reads:

    models:
      task: {model: embedded, api_base: null}
      judge: {model: openai/gpt-4.1-mini, api_key_env: OPENAI_API_KEY}
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memtrace_opt.config_schema import validate_config
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.roles import ModelRoles
from memtrace_opt.redact import redact

SCHEMA_VERSION = 1
_SECRET_KEY = re.compile(r"(^|_)(api_key|apikey|password|secret|access_token|auth_token|bearer)$", re.IGNORECASE)


def load_config(path: str | Path | None, *, sections: Collection[str] | None = None) -> dict[str, Any]:
    """Read a YAML config file ({} for None). With `sections`, other top-level keys are ConfigErrors.

    The whole file is checked against one schema (`config_schema.ConfigFile`: unknown keys, with the close
    name, and wrong types are ConfigErrors naming the key), and the `models` section against the model roles.
    Values come back converted to the schema's types (`limit: "5"` reads as 5).
    """
    if path is None:
        return {}
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}): a config is a YAML file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping at the top level, got {type(data).__name__}")
    if sections is not None:
        for key in data:
            if key not in sections:
                raise ConfigError(f"config file {path}: unknown key {key!r} (known: {', '.join(sorted(sections))})")
    check_secrets(data)
    data = validate_config(data, f"config file {path}").model_dump(exclude_unset=True)
    roles_from_config(data)
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: where (line and column, 1-based) and what, without PyYAML's excerpt."""
    if isinstance(exc, yaml.reader.ReaderError):
        char = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        return f"{exc.reason} (character {char} at offset {exc.position})"
    problem = getattr(exc, "problem", None)
    if not problem:
        return " ".join(str(exc).split())
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(exc, "context", None)
    return f"{where}{problem}" + (f" ({context})" if context else "")


def check_secrets(cfg: Mapping[str, Any], where: str = "") -> None:
    """Refuse secrets in a config (keys go in environment variables named by `api_key_env`)."""
    for key, value in cfg.items():
        name = f"{where}.{key}" if where else str(key)
        if _SECRET_KEY.search(str(key)):
            raise ConfigError(f"{name}: secrets do not belong in a config file; put the key in an environment "
                              "variable and name it with api_key_env")
        if isinstance(value, Mapping):
            check_secrets(value, name)


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`overrides` layered over `base`, recursively for mappings; a None override leaves base as is."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def roles_from_config(cfg: Mapping[str, Any]) -> ModelRoles:
    """The model roles of a config's `models` section (defaults where absent)."""
    return ModelRoles.from_dict(cfg.get("models"), "models")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = value.to_dict() if hasattr(value, "to_dict") else dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if not _SECRET_KEY.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def dump_config(cfg: Mapping[str, Any]) -> str:
    """Deterministic YAML (sorted keys) of `cfg`, with secret-looking keys dropped and other secrets redacted."""
    return yaml.safe_dump(redact(_plain(cfg)), sort_keys=True, default_flow_style=False, allow_unicode=True)


@dataclass(frozen=True)
class RunSettings:
    """A resolved configuration: the model roles plus every other section as given."""

    models: ModelRoles = field(default_factory=ModelRoles)
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> RunSettings:
        rest = {k: v for k, v in cfg.items() if k != "models"}
        return cls(models=roles_from_config(cfg), values=rest)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **dict(self.values), "models": self.models.to_dict()}
