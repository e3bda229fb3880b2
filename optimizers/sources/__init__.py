"""Candidate sources: each proposes `Candidate`s for the chosen predictor (`base.CandidateSource`): the
reflection LM's rewrites, the diagnosed patterns' rules, worked examples from its own correct calls, and the
combination of a rewrite with demos."""
