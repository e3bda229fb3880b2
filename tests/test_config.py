from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memtrace_opt.cli.options import model_overrides, roles_from_cli
from memtrace_opt.config import RunSettings, dump_config, load_config, merge, roles_from_config
from memtrace_opt.errors import ConfigError
from memtrace_opt.lm.roles import ModelRoles, ModelSpec

CONFIG = """
system: mem0
models:
  task: {model: embedded, api_base: null}
  judge: {model: openai/gpt-4.1-mini, api_key_env: OPENAI_API_KEY, max_tokens: 256}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_load_config_reads_yaml_and_none_is_empty(tmp_path: Path):
    assert load_config(None) == {}
    assert load_config(write(tmp_path, "")) == {}
    cfg = load_config(write(tmp_path, CONFIG))
    roles = roles_from_config(cfg)
    assert cfg["system"] == "mem0"
    assert roles.spec("task") == ModelSpec(model="embedded")
    assert roles.spec("judge") == ModelSpec(model="openai/gpt-4.1-mini", api_key_env="OPENAI_API_KEY", max_tokens=256)
    assert roles.spec("reflection") == roles.spec("task")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("models:\n  judge: {modle: x}\n", "models.judge.modle"),
        ("models:\n  jduge: {model: x}\n", "models.jduge"),
        ("models:\n  task: {max_tokens: lots}\n", "models.task.max_tokens"),
        ("models:\n  task: {model: x, extra: {api_key: sk-1}}\n", "models.task.extra.api_key"),
        ("- a list\n", "top level"),
        ("models: {task: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_config_names_the_problem(tmp_path: Path, text: str, named: str):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_config(write(tmp_path, text))


def test_sections_restrict_top_level_keys(tmp_path: Path):
    path = write(tmp_path, CONFIG)
    assert load_config(path, sections={"system", "models"})["system"] == "mem0"
    with pytest.raises(ConfigError, match="unknown key 'system'"):
        load_config(path, sections={"models"})


def test_missing_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.yaml")


def test_merge_is_nested_and_none_means_not_given():
    base = {"models": {"task": {"model": "embedded", "api_base": "http://a"}}, "seed": 1, "tags": [1]}
    over = {"models": {"task": {"model": "openai/x", "api_base": None}, "judge": {"model": "fake"}}, "seed": None,
            "tags": [2]}
    merged = merge(base, over)
    assert merged == {"models": {"task": {"model": "openai/x", "api_base": "http://a"}, "judge": {"model": "fake"}},
                      "seed": 1, "tags": [2]}
    assert base["models"]["task"]["model"] == "embedded"  # inputs untouched


def test_dump_is_deterministic_round_trips_and_has_no_secrets():
    roles = ModelRoles(task=ModelSpec(model="embedded"), judge=ModelSpec(model="openai/gpt-4.1-mini",
                                                                         api_key_env="OPENAI_API_KEY"))
    cfg = {"seed": 3, "models": roles, "data": Path("a/b.json"), "api_key": "sk-secret", "nested": {"x_token": "t"}}
    text = dump_config(cfg)
    assert text == dump_config(dict(reversed(list(cfg.items()))))
    assert "sk-secret" not in text and "x_token: '***'" in text  # a secret-named key's value never reaches disk
    data = yaml.safe_load(text)
    assert roles_from_config(data).resolved() == roles.resolved()
    assert data["models"]["judge"]["api_key_env"] == "OPENAI_API_KEY" and data["data"] == "a/b.json"
    assert dump_config(data) == text


def test_run_settings_keep_other_sections():
    settings = RunSettings.from_config({"system": "rag", "models": {"task": {"model": "fake"}}})
    assert settings.models.spec("judge").model == "fake"
    assert settings.to_dict()["system"] == "rag" and settings.to_dict()["schema_version"] == 1


def test_flags_override_file_which_overrides_defaults(tmp_path: Path):
    path = write(tmp_path, CONFIG)
    assert roles_from_cli(None).spec("judge").model == "embedded"
    from_file = roles_from_cli(path)
    assert from_file.spec("judge").model == "openai/gpt-4.1-mini"
    flagged = roles_from_cli(path, lm="ollama_chat/qwen2.5", lm_api_base="http://localhost:11434",
                             attributor_lm="fake")
    assert flagged.spec("task") == ModelSpec(model="ollama_chat/qwen2.5", api_base="http://localhost:11434")
    assert flagged.spec("judge").model == "openai/gpt-4.1-mini"  # the file's judge stays
    assert flagged.spec("reflection").model == "ollama_chat/qwen2.5"  # unset role follows the task flag
    assert flagged.spec("attributor").model == "fake"
    overridden = roles_from_cli(path, judge_lm="fake")
    assert overridden.spec("judge").model == "fake" and overridden.spec("judge").max_tokens == 256


def test_model_overrides_only_carry_given_flags():
    assert model_overrides() == {}
    assert model_overrides(judge_api_base="http://j") == {"models": {"judge": {"model": None, "api_base": "http://j"}}}
