from __future__ import annotations

import dspy
import pytest

from memtrace_opt.errors import ConfigError, ModelUnavailable
from memtrace_opt.lm import ROLES, ModelRoles, ModelSpec, RoleLM, build_lm
from memtrace_opt.testing import FakeEngine


def test_unset_roles_default_to_the_task_spec():
    task = ModelSpec(model="openai/gpt-4.1-mini")
    judge = ModelSpec(model="fake")
    roles = ModelRoles(task=task, judge=judge)
    assert roles.resolved() == {"task": task, "judge": judge, "reflection": task, "attributor": task}
    assert ModelRoles().spec("attributor").model == "embedded"
    with pytest.raises(ValueError, match="unknown model role"):
        roles.spec("writer")


def test_spec_kinds():
    assert [ModelSpec(model=m).kind for m in ("embedded", "embedded:0.5b", "fake", "fake/x", "openai/gpt-4.1")] == [
        "embedded", "embedded", "fake", "fake", "litellm"]


def test_roles_round_trip_through_dicts():
    roles = ModelRoles(task=ModelSpec(model="ollama_chat/qwen2.5", api_base="http://localhost:11434",
                                      temperature=0.2, extra={"num_retries": 1}),
                       judge=ModelSpec(model="openai/gpt-4.1-mini", api_key_env="OPENAI_API_KEY"))
    data = roles.to_dict()
    assert list(data) == list(ROLES)
    assert ModelRoles.from_dict(data).resolved() == roles.resolved()


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"writer": {"model": "x"}}, "models.writer"),
        ({"task": {"modle": "x"}}, "models.task.modle"),
        ({"judge": {"max_tokens": "many"}}, "models.judge.max_tokens"),
        ({"judge": {"temperature": True}}, "models.judge.temperature"),
        ({"task": {"model": " "}}, "models.task.model"),
        ({"task": "embedded"}, "models.task"),
    ],
)
def test_bad_role_data_names_the_key(data, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ModelRoles.from_dict(data)


def test_build_fake_lm_uses_the_given_engine():
    engine = FakeEngine()
    lm = build_lm(ModelSpec(model="fake"), "judge", fake_engine=engine)
    assert isinstance(lm, RoleLM) and isinstance(lm, dspy.LM)
    assert lm.model == "fake/judge" and lm.role == "judge" and lm.engine is engine and lm.cache is False
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="q")
    assert len(engine.calls) == 1


def test_the_fake_model_ignores_the_embedded_engines_keys_of_a_config_written_for_it():
    engine = FakeEngine()
    spec = ModelSpec(model="fake", extra={"n_ctx": 16384, "prefix_cache_mb": 0, "cache": False})
    lm = build_lm(spec, "task", fake_engine=engine)
    assert "n_ctx" not in lm.kwargs and "prefix_cache_mb" not in lm.kwargs
    with dspy.context(lm=lm):
        dspy.Predict("question -> answer")(question="q")
    assert len(engine.calls) == 1 and engine.calls[0].max_tokens is not None


def test_litellm_spec_reads_the_key_from_the_named_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMTRACE_TEST_KEY", "sk-test")
    lm = build_lm(ModelSpec(model="openai/gpt-4.1-mini", api_key_env="MEMTRACE_TEST_KEY", max_tokens=99), "judge")
    assert lm.model == "openai/gpt-4.1-mini"
    assert lm.kwargs["api_key"] == "sk-test" and lm.kwargs["max_tokens"] == 99
    monkeypatch.delenv("MEMTRACE_TEST_KEY")
    with pytest.raises(ModelUnavailable, match="MEMTRACE_TEST_KEY is not set"):
        build_lm(ModelSpec(model="openai/gpt-4.1-mini", api_key_env="MEMTRACE_TEST_KEY"), "judge")


def test_local_openai_compatible_server_needs_no_real_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = build_lm(ModelSpec(model="openai/qwen", api_base="http://localhost:8000/v1"), "task")
    assert lm.kwargs["api_base"] == "http://localhost:8000/v1" and lm.kwargs["api_key"] == "unused"


def test_invalid_litellm_settings_become_config_errors():
    with pytest.raises(ConfigError, match="models.task"):
        build_lm(ModelSpec(model="openai/gpt-5", temperature=0.0, max_tokens=100), "task")
