"""The questions attribution methods ask the attributor LM, one Signature each."""

from __future__ import annotations

from typing import Literal

import dspy

__all__ = [
    "JudgeOperation",
    "CheckGold",
    "RepairOutputs",
    "BlameInLog",
    "JudgeStep",
    "PickHalf",
    "ErrorTypeName",
]

ErrorTypeName = Literal[
    "ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError", "GoldError"
]


class JudgeOperation(dspy.Signature):
    """You audit one operation of an LLM memory system that later answered a question wrongly.
    Judge only this operation, against its own job and what it was given: did it do its job correctly with
    respect to the information needed to answer the question (the gold answer and the evidence turns)?
    It is faulty if the needed information was in its inputs (or, for a retrieval step, in the store it
    searched) and it dropped, distorted, overwrote, deleted, failed to return, or ignored it. It is not
    faulty when the needed information never reached it, or when it passed the information on intact."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField(desc="the correct answer")
    evidence: str = dspy.InputField(desc="the conversation turns that hold the answer")
    operation: str = dspy.InputField(desc="the operation's name and its job")
    op_inputs: str = dspy.InputField(desc="what the operation received")
    op_outputs: str = dspy.InputField(desc="what the operation produced")
    reason: str = dspy.OutputField(desc="one or two sentences")
    faulty: bool = dspy.OutputField(desc="true if this operation failed its own job for the needed information")


class CheckGold(dspy.Signature):
    """Decide whether a benchmark's gold answer is supported by the conversation turns given as its evidence.
    Consider only the evidence turns, allow paraphrase and simple inference (dates relative to the session
    date, counting). Answer false only when the evidence contradicts the gold answer or clearly says
    something else."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField()
    evidence: str = dspy.InputField(desc="the turns the benchmark cites as evidence, with their dates")
    reason: str = dspy.OutputField(desc="one sentence")
    supported: bool = dspy.OutputField(desc="true if the evidence supports the gold answer")


class RepairOutputs(dspy.Signature):
    """An operation of an LLM memory system produced outputs that lost information needed later. Rewrite its
    outputs so that it does its own job correctly and keeps the needed information. Keep the same JSON shape
    (the same keys, the same kinds of values) and change as little as possible."""

    operation: str = dspy.InputField(desc="the operation's name and its job")
    op_inputs: str = dspy.InputField()
    needed: str = dspy.InputField(desc="the question, its gold answer and the evidence turns")
    current_outputs: str = dspy.InputField(desc="the outputs as JSON")
    repaired_outputs: str = dspy.OutputField(desc="the corrected outputs as one JSON object")


class BlameInLog(dspy.Signature):
    """A memory system (it stores a conversation in memory, then answers questions from it) answered a
    question wrongly. Read the log of its operations and name the one operation whose mistake decided the
    failure (the earliest operation that went wrong, such that had it been right the answer would have
    been right), and the kind of error: ExtractionError (information lost or distorted when memory was
    formed), UpdateError (a wrong update of stored memory), DeletionError (needed memory deleted or trimmed),
    RetrievalError (needed memory not retrieved), ResponseError (the answer ignored or misread what it was
    given), GoldError (the expected answer itself is wrong)."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField()
    prediction: str = dspy.InputField(desc="the wrong answer the system gave")
    op_log: str = dspy.InputField(desc="operations in execution order, each headed by its id (op:N)")
    reason: str = dspy.OutputField()
    op_id: str = dspy.OutputField(desc="the id of the decisive operation, e.g. op:12")
    error_type: ErrorTypeName = dspy.OutputField()


class JudgeStep(dspy.Signature):
    """A memory system answered a question wrongly. You read its operations one at a time in execution order.
    Decide whether the operation shown is the decisive error: it went wrong, and had it been right the
    question would have been answered correctly."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField()
    prediction: str = dspy.InputField(desc="the wrong answer the system gave")
    earlier_ops: str = dspy.InputField(desc="names of the operations before this one")
    operation: str = dspy.InputField(desc="this operation: its job, inputs and outputs")
    reason: str = dspy.OutputField()
    decisive: bool = dspy.OutputField()


class PickHalf(dspy.Signature):
    """A memory system answered a question wrongly. Its operation log is split in two halves. Decide which half
    holds the decisive error (the operation that went wrong such that, had it been right, the answer would
    have been right)."""

    question: str = dspy.InputField()
    gold_answer: str = dspy.InputField()
    prediction: str = dspy.InputField(desc="the wrong answer the system gave")
    first_half: str = dspy.InputField()
    second_half: str = dspy.InputField()
    reason: str = dspy.OutputField()
    half: Literal["first", "second"] = dspy.OutputField()
