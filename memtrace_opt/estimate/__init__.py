"""How long a job will take on this machine, said before it starts.

A dry run of the program on the slice under an instant scripted fake LM counts the LM calls and the prompt and
reply words the job will make (`count_work`); this machine's rates for the model (`memtrace doctor` measures and
stores them; a slowed fake LM's are known) turn them into seconds: prompt tokens / reading rate + completion
tokens (each capped by its call's reply limit) / decoding rate. `run_estimate` sums a run; the optimizer's and
compare's estimates (`memtrace_opt.optimizers.comparison.estimate`) add rounds and rows capped by their budgets.
A scripted reply is priced at the length the model's replies to that kind of call have had in earlier jobs here,
where known (`learn_replies`, which each job calls as it ends).
"""

from memtrace_opt.estimate._jobs import (
    NO_RATES,
    Estimate,
    announce,
    job_rates,
    learn_replies,
    plural,
    run_estimate,
)
from memtrace_opt.estimate._rates import (
    RATES_SCHEMA,
    Rates,
    RateStore,
    known_rates,
    machine_id,
    measure_rates,
    model_key,
    rates_path,
    words,
)
from memtrace_opt.estimate._work import CallCost, ConversationWork, Cost, Work, count_work

__all__ = [
    "NO_RATES", "Estimate", "announce", "job_rates", "learn_replies", "plural", "run_estimate", "RATES_SCHEMA",
    "Rates", "RateStore",
    "known_rates", "machine_id", "measure_rates", "model_key", "rates_path", "words", "CallCost",
    "ConversationWork", "Cost", "Work", "count_work",
]
