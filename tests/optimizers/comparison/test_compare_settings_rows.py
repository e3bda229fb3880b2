"""The settings rows of `memtrace compare`: `memtrace_promptonly` (our loop without the settings search) and
`optuna_blind` (the settings search over every declared setting, no attribution), with each row's cost."""

from __future__ import annotations

import json
import logging

from optfixtures import make_models
from toydata import write_locomo

from memtrace_opt.metrics import TOKEN_RULE
from memtrace_opt.optimizers import LoopSettings
from memtrace_opt.optimizers.comparison.compare import CompareRequest, compare_optimizers
from memtrace_opt.testing import Skill
from memtrace_opt.testing.skills import default_skills


def limited(engine, capacity: int = 1) -> None:
    """Each extraction call keeps only its first fact, whatever its instruction: only smaller windows help."""
    facts = next(s for s in default_skills() if s.outputs == ("facts",))
    engine.skills[:] = [Skill(("facts",), lambda call: {"facts": list(facts.fn(call)["facts"])[:capacity]},
                              name="facts"), *engine.skills]


def test_promptonly_changes_no_setting_and_the_blind_search_reports_its_cost(tmp_path, caplog):
    models, engine = make_models()
    limited(engine)
    data = tmp_path / "toy.json"
    write_locomo(data, ("toy-a", "toy-b", "toy-c"))
    request = CompareRequest(system="mem0", data=str(data), out=tmp_path / "cmp", train="toy-a", val="toy-b",
                             test="toy-c", optimizers=("memtrace", "memtrace_promptonly", "optuna_blind"),
                             budget=400, attribution="lineage", program_settings={"window_turns": 4},
                             loop=LoopSettings.of(candidates=1, minibatch=9, rounds=2, repairs=0, min_val_questions=1))
    with caplog.at_level(logging.INFO, logger="memtrace_opt.optimizers.comparison.optuna_blind"):
        rows = {row.optimizer: row for row in compare_optimizers(request, models=models).rows}
    trials = [r.getMessage() for r in caplog.records if ": trial " in r.getMessage()]
    scored = [t for t in trials if ": train " in t or "refused: over" in t]
    assert scored and all("window_turns" in t for t in scored)  # each trial says what it set and how it did
    assert all(": train " in t or "refused: over" in t or "valset" in t for t in trials)
    assert all(row.error is None for row in rows.values())
    prompt_only = rows["memtrace_promptonly"]
    assert prompt_only.settings_changed == {}
    assert all(not c.get("settings") for r in prompt_only.details.get("rounds", []) for c in r["candidates"])
    ours = rows["memtrace"]
    assert any(c.get("origin") == "settings" for r in ours.details["rounds"] for c in r["candidates"])
    blind = rows["optuna_blind"]
    for row in rows.values():  # each row's cost beside its accuracy, the seed's first
        assert row.cost["seed_calls_per_conversation"] > 0 and row.cost["prompt_words_per_answer"] > 0
    if blind.settings_changed:  # whatever it took stays within the cost limit
        assert blind.cost["calls_per_conversation"] <= 1.5 * blind.cost["seed_calls_per_conversation"]
    table = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert {row["optimizer"] for row in table["rows"]} == set(rows)
    markdown = (tmp_path / "cmp" / "compare.md").read_text()
    assert "cost: calls / conv, prompt words / answer" in markdown
    kept = blind.details["trials"]  # what the blind search tried, in compare.json and told in compare.md
    assert len(scored) <= len(kept) <= len(scored) + 1 and {"window_turns", "top_k"} <= kept[0]["settings"].keys()
    assert all(("train" in t) != ("refused" in t) for t in kept[:-1])  # the last may be cut by the budget
    assert "What optuna_blind's trials did" in markdown and f"- trial {kept[0]['trial']} (" in markdown
    assert f"the seed: train {blind.details['seed']['train']:.3f}" in markdown
    assert table["metric"] == TOKEN_RULE and f"accuracy by {TOKEN_RULE}" in markdown  # which rule scored it
