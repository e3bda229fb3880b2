"""The repair-demos candidate: the current instruction with demos made from confirmed repairs."""

from __future__ import annotations

from types import SimpleNamespace

from optfixtures import EXTRACT

from memtrace_opt.optimizers.core.candidate import REPAIR
from memtrace_opt.optimizers.core.repair import Repair
from memtrace_opt.optimizers.sources.demo_source import DemoSettings
from memtrace_opt.optimizers.sources.repair_demos import RepairDemosSource

PROMPT = ("[[ ## session_date ## ]]\nMonday, 13 March 2034\n\n[[ ## earlier_messages ## ]]\n(none)\n\n"
          "[[ ## new_messages ## ]]\nAlice: I adopted a kitten yesterday.\n\nRespond with ...")


def _request(planted, repairs):
    return SimpleNamespace(program=planted, predictor=EXTRACT, repairs=repairs, local=None,
                           instruction=dict(planted.named_predictors())[EXTRACT].signature.instructions)


def _repair(fact="Alice adopted a kitten yesterday. (13 March, 2034)"):
    return Repair("c1", "op:0", "mem0.extract_facts", EXTRACT, PROMPT, "[[ ## facts ## ]]\n[]",
                  {"facts": f'["{fact}"]'}, (fact,), "12 March 2034")


def test_one_candidate_with_a_demo_per_repair(planted):
    [candidate] = RepairDemosSource().propose(_request(planted, [_repair()]), [])
    assert candidate.origin == REPAIR and candidate.predictor == EXTRACT
    assert candidate.demos == ({"session_date": "Monday, 13 March 2034", "earlier_messages": "(none)",
                                "new_messages": "Alice: I adopted a kitten yesterday.",
                                "facts": '["Alice adopted a kitten yesterday. (13 March, 2034)"]'},)


def test_no_repairs_no_candidate_and_the_demo_budget_holds(planted):
    assert RepairDemosSource().propose(_request(planted, []), []) == []
    assert RepairDemosSource(DemoSettings(demo_budget=10)).propose(_request(planted, [_repair()]), []) == []
