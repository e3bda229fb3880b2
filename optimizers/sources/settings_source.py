"""`SettingsSource`: new values for the tunable settings of the op the round chose (`programs/tunable.py`), found by
an Optuna search scored on the settings objective (`gates/settings.py`).

The round's own study of settings (`NAME~settings:rN`, in the optimization's storage) holds every setting tried
and its score: a TPE sampler, seeded with the run's seed and the round, proposes a value for each of the target's
tunable settings, the objective scores it (the training questions' evidence as the candidate program forms it),
the study is told the net gain, until `trials` settings have been scored. A candidate over the cost limit is priced
by a dry run alone (no LM call), told the worst score and not counted, up to four draws a counted trial. A
resumed round finds its finished trials in the study and proposes the same. The best `keep` settings that beat the
seed, within the cost limit, are the round's settings candidates (`origin: "settings"`); their scores are kept by
the objective, so scoring them again costs nothing. Nothing when the target declares no tunable setting or the
round has no settings objective (`--no-settings`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memtrace_opt.optimizers.core.candidate import Candidate
from memtrace_opt.optimizers.core.knobs import knob
from memtrace_opt.optimizers.sources.base import SourceRequest
from memtrace_opt.programs.tunable import tunables_for

if TYPE_CHECKING:
    import optuna

__all__ = ["SettingsSearch", "SettingsSource"]

log = logging.getLogger(__name__)

_MAX_DRAWS = 4  # draws a round may make per counted trial: settings over the cost limit cost no LM call


@dataclass(frozen=True)
class SettingsSearch:
    """The settings search's knobs: on (`settings`), a round whose target op declares tunable settings searches
    them with `settings_trials` trials scored on the settings objective; a candidate spending more than
    `cost_limit` times the seed's LM calls per conversation or prompt tokens per answer is rejected."""

    settings: bool = knob(True, "Search the blamed op's declared settings (window sizes, top-k, ...) with an Optuna "
                                "sampler scored on the training questions' evidence (default: on).",
                          flag="--settings/--no-settings")
    settings_trials: int = knob(4, "Settings tried a round (each scored on the training questions' evidence).")
    cost_limit: float = knob(1.5, "Reject a settings candidate that spends more than this many times the seed's LM "
                                  "calls per conversation or prompt tokens per answer.")

    def __post_init__(self) -> None:
        if self.settings_trials < 1 or self.cost_limit < 1:
            from memtrace_opt.errors import ConfigError

            raise ConfigError("optimizer: settings_trials must be >= 1 and cost_limit >= 1")


@dataclass
class SettingsSource:
    """The settings candidates of a round (module doc). `storage` and `study_name` are the optimization's."""

    search: SettingsSearch
    storage: Any = None
    study_name: str = "memtrace"
    seed: int = 0
    keep: int = 2

    def propose(self, request: SourceRequest, taken: Sequence[Candidate]) -> list[Candidate]:
        objective = request.settings
        if objective is None:
            return []
        declared = tunables_for(request.program.config, [objective.op_name])
        if not declared:
            return []
        study = self._study(request.round, objective.op_name)
        distributions = {t.name: t.distribution() for t in declared}
        current = {t.name: getattr(request.program.config, t.name) for t in declared}
        scores: dict[str, tuple[dict[str, Any], Any]] = {}
        finished = [t for t in study.trials if t.state.name == "COMPLETE"]
        for done in finished:
            scores[_key(done.params)] = (dict(done.params), None)
        counted = sum(1 for t in finished if not t.user_attrs.get("over_cost"))
        draws = len(finished)
        while counted < self.search.settings_trials and draws < _MAX_DRAWS * self.search.settings_trials:
            draws += 1
            with warnings.catch_warnings():  # a storage's heartbeats are meant for study.optimize
                warnings.simplefilter("ignore", UserWarning)
                trial = study.ask(distributions)
            values = dict(trial.params)
            if values == {k: v for k, v in current.items() if k in values}:
                study.tell(trial, 0.0)  # the seed's own settings: nothing to gain
                counted += 1
                continue
            score = objective.score(request.program, Candidate.of_settings(request.predictor, values))
            if score.over_cost:  # priced by a dry run, no LM call: told the worst score, and not counted as a trial
                trial.set_user_attr("over_cost", True)
                study.tell(trial, float(-score.targets - 1))
            else:
                counted += 1
                study.tell(trial, score.value)
            scores[_key(values)] = (values, score)
            log.info("round %d settings %s for %s: %s", request.round, values, objective.op_name, score.why)
        ranked = []
        for values, score in scores.values():
            score = score or objective.score(request.program, Candidate.of_settings(request.predictor, values))
            if not score.over_cost and score.gain >= 1:
                ranked.append((score.gain, -score.lost, values))
        ranked.sort(key=lambda item: (-item[0], -item[1], _key(item[2])))
        return [Candidate.of_settings(request.predictor, values) for _, _, values in ranked[: self.keep]]

    def _study(self, number: int, op_name: str) -> optuna.Study:
        import optuna  # the CLI reads the settings tree without loading Optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.create_study(
                study_name=f"{self.study_name}~settings:r{number}:{op_name}", storage=self.storage,
                direction="maximize", load_if_exists=True,
                sampler=optuna.samplers.TPESampler(seed=self.seed * 1000 + number, n_startup_trials=2))


def _key(values: dict[str, Any]) -> str:
    return repr(sorted(values.items()))
