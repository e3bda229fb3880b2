"""Secrets never reach an artifact: the rules, and every artifact kind of a run that was handed secrets."""

from __future__ import annotations

import json

import pytest
from runfixtures import write_conversations

from memtrace_opt.lm.models import Models
from memtrace_opt.lm.roles import ModelRoles, ModelSpec
from memtrace_opt.redact import REDACTED, redact, redact_text
from memtrace_opt.runner import RunRequest, run_system

KEY = "sk-proj-Zx81Qw0pLm4Nb7Vc2Xr5Ty9U"
TOKEN = "tok9f8e7d6c5b4a3f2e1d0c"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize("text, kept", [
    (f"http://user:{KEY}@host:8000/v1", "http://user:***@host:8000/v1"),
    (f"https://{TOKEN}@example.com/x", "https://***@example.com/x"),
    (f"http://host/v1?api_key={TOKEN}&model=m", "http://host/v1?api_key=***&model=m"),
    (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer ***"),
    (f"my key is {KEY}.", "my key is ***."),
    (f"clone with {GH}", "clone with ***"),
    ("plain text about a kitten named Luna", "plain text about a kitten named Luna"),
    ("http://localhost:8000/v1", "http://localhost:8000/v1"),
    ("user@example.com wrote", "user@example.com wrote"),
])
def test_redact_text(text, kept):
    assert redact_text(text) == kept
    assert redact_text(kept) == kept  # idempotent: a redacted artifact round-trips


def test_redact_values_under_secret_names_and_inside_strings():
    data = {"extra": {"headers": {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": TOKEN},
                      "session_token": TOKEN, "max_tokens": 64},
            "api_key_env": "OPENAI_API_KEY", "api_base": f"http://u:{KEY}@h/v1", "note": [f"see {KEY}"]}
    clean = redact(data)
    assert TOKEN not in json.dumps(clean) and KEY not in json.dumps(clean)
    assert clean["extra"]["headers"]["Authorization"] == REDACTED and clean["extra"]["max_tokens"] == 64
    assert clean["api_key_env"] == "OPENAI_API_KEY" and clean["api_base"] == "http://u:***@h/v1"


def test_no_artifact_of_a_run_holds_a_secret(tmp_path):
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memtrace_opt.cli.attribute_cmd import attribute_command_impl
    from memtrace_opt.export import export_otlp
    from memtrace_opt.export._mlflow import run_params
    from memtrace_opt.report import load_run, write_report

    spec = ModelSpec(model="fake", api_base=f"http://user:{KEY}@models.example/v1",
                     extra={"metadata": {"Authorization": f"Bearer {TOKEN}"}, "session_token": TOKEN})
    roles = ModelRoles(task=spec)
    data = write_conversations(tmp_path / "secret.json", ("c-a",), text=f"My API key is {KEY}, keep it safe.")
    request = RunRequest(system="long_context", data=str(data), out=tmp_path / "run", roles=roles, judge=False)
    summary = run_system(request, progress=False, models=Models(roles))
    attribute_command_impl(summary.run_dir, "lineage", progress=False, models=Models(roles))
    write_report(summary.run_dir)

    exporter = InMemorySpanExporter()
    export_otlp(summary.run_dir, span_exporter=exporter)
    exported = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()], default=str)
    exported += json.dumps(run_params(load_run(summary.run_dir)))

    files = {p.relative_to(summary.run_dir).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for p in summary.run_dir.rglob("*") if p.is_file() and p.suffix in (".yaml", ".json", ".jsonl", ".html")}
    kinds = {name.split("/")[0] for name in files}
    assert {"config.yaml", "manifest.json", "cases.jsonl", "events", "graphs", "verdicts.jsonl",
            "report.html"} <= kinds
    for name, text in {**files, "exports": exported}.items():
        assert KEY not in text and TOKEN not in text, name
    assert "user:***@models.example" in files["config.yaml"]
    assert "My API key is ***" in files["events/c-a.jsonl"]
