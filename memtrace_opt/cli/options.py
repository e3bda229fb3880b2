"""Typer options shared by commands: --config and the model of each role. Flags override the file.

    @app.command()
    def run(config: ConfigOption = None, lm: LmOption = None, lm_api_base: LmApiBaseOption = None, ...):
        roles = roles_from_cli(config, lm=lm, lm_api_base=lm_api_base, ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memtrace_opt.config import load_config, merge, roles_from_config
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.roles import ModelRoles

MODEL_HELP = "embedded[:1.5b|0.5b|smollm2|/path.gguf], fake, or a LiteLLM model string such as openai/gpt-4.1-mini"

# Optional[...] rather than `X | None`: typer reads these annotations at runtime on Python 3.10 too.
ConfigOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--config", help="YAML config file; flags override its values.", dir_okay=False),
]
LmOption = Annotated[Optional[str], typer.Option("--lm", help=f"Task model: {MODEL_HELP}.")]  # noqa: UP045
LmApiBaseOption = Annotated[
    Optional[str], typer.Option("--lm-api-base", help="API base URL for the task model.")  # noqa: UP045
]
JudgeLmOption = Annotated[
    Optional[str], typer.Option("--judge-lm", help="Judge model (default: the task model).")  # noqa: UP045
]
JudgeApiBaseOption = Annotated[
    Optional[str], typer.Option("--judge-api-base", help="API base URL for the judge model.")  # noqa: UP045
]
ReflectionLmOption = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--reflection-lm", help="Model that rewrites prompts (default: the task model)."),
]
ReflectionApiBaseOption = Annotated[
    Optional[str], typer.Option("--reflection-api-base", help="API base URL for the reflection model.")  # noqa: UP045
]
AttributorLmOption = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--attributor-lm", help="Model that attributes failures (default: the task model)."),
]
AttributorApiBaseOption = Annotated[
    Optional[str], typer.Option("--attributor-api-base", help="API base URL for the attributor model.")  # noqa: UP045
]

JudgeEvidenceOption = Annotated[
    bool,
    typer.Option("--judge-evidence/--no-judge-evidence",
                 help="With --judge-lm: also ask the judge whether the gold evidence turns say the gold answer, and "
                      "call a case whose turns do not a GoldError (lineage, graphtrace, counterfactual). Off by "
                      "default: a small judge reads an answer the turns imply as not said."),
]

GoldOption = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--gold", help="Gold answers: corrected (the QA corrections file found beside the data, glued words "
                 "and glued pairs split; the default) or upstream (the file as published)."),
]


def model_overrides(
    lm: str | None = None,
    lm_api_base: str | None = None,
    judge_lm: str | None = None,
    judge_api_base: str | None = None,
    reflection_lm: str | None = None,
    reflection_api_base: str | None = None,
    attributor_lm: str | None = None,
    attributor_api_base: str | None = None,
) -> dict[str, Any]:
    """The model flags as a config overlay for `merge` (None = flag not given)."""
    pairs = {
        "task": (lm, lm_api_base),
        "judge": (judge_lm, judge_api_base),
        "reflection": (reflection_lm, reflection_api_base),
        "attributor": (attributor_lm, attributor_api_base),
    }
    models = {
        role: {"model": model, "api_base": base}
        for role, (model, base) in pairs.items()
        if model is not None or base is not None
    }
    return {"models": models} if models else {}


def config_from_cli(config_path: Path | None, **model_flags: str | None) -> dict[str, Any]:
    """The config file (if any) with the model flags layered over it."""
    return merge(load_config(config_path), model_overrides(**model_flags))


def check_judge_evidence(judge_evidence: bool, roles: ModelRoles) -> None:
    """`--judge-evidence` asks the judge role: without one it would change nothing, so it is a usage error."""
    if judge_evidence and roles.judge is None:
        raise ConfigError("--judge-evidence asks the judge role: name it with --judge-lm (or models.judge in --config)")


def roles_from_cli(config_path: Path | None, **model_flags: str | None) -> ModelRoles:
    """Model roles from defaults < config file < flags (the keyword arguments of `model_overrides`). A role
    left unset uses the task model."""
    return roles_from_config(config_from_cli(config_path, **model_flags))
