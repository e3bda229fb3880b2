"""The bottom layer of the optimizers: plain values every part shares (the candidate prompt, a gate's decision,
the settings knobs, the LM-call budget, a program's prompts on disk, the evidence a proposer reads, a confirmed
repair). Nothing here imports `evaluation/`, `sources/`, `gates/`, `loop/` or `comparison/`."""
