"""The loop: the teleprompter that drives the rounds, one round's pipeline, the stop policy, the settings tree,
the records a run writes and the study that makes a killed run resume."""
