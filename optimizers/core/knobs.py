"""`knob`: a settings field that is also a command-line flag, declared once.

    rounds: int = knob(6, "At most N rounds.")                    # --rounds
    compact_demos: bool = knob(True, "...", flag="--compact-demos/--full-demos")

The field's name is the flag's (`--demo-budget` is `demo_budget`), the config file's `optimize:` key and the
name every consumer uses; `knobs(settings_class)` lists them for the CLI to generate its options from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = ["Knob", "knob", "knobs"]


class Knob(NamedTuple):
    """One flag: the settings field `name`, its `flag` declaration (e.g. "--local-check/--no-local-check"),
    its help text and the settings class that owns it."""

    name: str
    flag: str
    help: str
    owner: type


def knob(default: Any, help: str, *, flag: str | None = None) -> Any:  # noqa: A002 - typer's own word
    """A dataclass field with `default` whose flag is `flag` (default: `--` and the field name, dashed)."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag})


def knobs(settings: type) -> Iterator[Knob]:
    """The knobs of a settings class and of the settings classes it holds, depth first, in field order."""
    for f in dataclasses.fields(settings):
        nested = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if nested is not None and dataclasses.is_dataclass(nested):
            yield from knobs(nested)  # type: ignore[arg-type]
        elif "help" in f.metadata:
            yield Knob(f.name, f.metadata["flag"] or "--" + f.name.replace("_", "-"), f.metadata["help"], settings)
