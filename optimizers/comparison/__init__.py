"""The comparison harness: DSPy's optimizers run on the same program, metric, data and LM-call budget as ours,
the paired statistics of their held-out answers, and the comparison's tables."""
