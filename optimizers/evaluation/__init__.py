"""The evaluation substrate: cached, traced evaluation of a program on cases, the metric, the replay memo, the
examples and splits, blame from attribution verdicts, the evidence and diagnosis a proposal reads, and the
program's prompts in and out."""
