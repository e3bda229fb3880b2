"""The local check: does a candidate instruction repair the blamed calls, before paying for the replay?

Attribution names the op call that lost each failed case's information. A candidate for an upstream
predictor (an extraction, an update decision: anything but the op that writes the answer) is first run on
those very calls, one LM call each, with the prompt they were shown (the recorded user message under the
candidate's system message and demos), and on the same predictor's calls in correctly answered cases. A call
"carries the answer" when its parsed output holds it by attribution's own test (`NeededInfo.holds`): the gold
answer's words in one part of the output (one fact of a list), with the person or thing the question names and
every number of the answer. A fact list whose words reach the answer only when read together does not carry
it: attribution would blame that call again. (A case recorded without its question falls back to every content
word of the gold answer anywhere in the output.) The candidate goes on to the minibatch
replay (for Mem0's extraction: the whole write path again, minutes per conversation) only if it makes more
blamed calls carry the answer than it makes correct cases' calls lose it; otherwise it is rejected for a few
LM calls. A blamed call with a confirmed repair (`evaluation/repairs.py`) is checked against the repair
instead: it is fixed when its output now produces what the repair adds (each added fact or action text, by
`TARGET_SHARE` of its content words in one part of the output).

    cases = local_cases(predictor, evaluation, blame, memo)      # kept in the round plan (JSON)
    result = check_candidate(program, predictor, text, cases, lm)
    result.passed, result.why, result.to_dict()
    LocalCheckGate(cases, lm).check(program, candidate)          # the gate: (result, Decision)

Answer-op candidates are not checked this way: their minibatch replay re-runs only the answer calls already.
Cases without a recorded exchange or whose gold answer has no tokens are left out; with no blamed call left
to check, every candidate passes.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import dspy

from memtrace_opt.attribution import GraphView, NeededInfo, value_parts
from memtrace_opt.metrics.text import answer_tokens
from memtrace_opt.optimizers.core.decision import Decision, Status
from memtrace_opt.optimizers.evaluation.blame import Blame, op_seq
from memtrace_opt.optimizers.evaluation.cached import EvalResult
from memtrace_opt.optimizers.evaluation.carry import TARGET_SHARE, carries, item_share
from memtrace_opt.optimizers.evaluation.evidence import GraphCache, correct_calls, op_event
from memtrace_opt.optimizers.evaluation.local_set import predictor_op
from memtrace_opt.optimizers.evaluation.memo import ReplayMemo

__all__ = ["LocalCase", "LocalCheckGate", "LocalResult", "local_cases", "check_candidate", "reply_parts"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class LocalCase:
    """One recorded call of the predictor: the user message it was shown, its reply, the case's gold answer and
    question, and whether attribution blamed this call (else it is a call in a correctly answered case)."""

    case_id: str
    gold: str
    prompt: str
    response: str
    blamed: bool
    question: str = ""
    target: tuple[str, ...] = ()  # what a confirmed repair of this call adds (empty: no repair)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["target"] = list(self.target)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalCase:
        return cls(str(data["case_id"]), str(data["gold"]), str(data["prompt"]), str(data["response"]),
                   bool(data["blamed"]), str(data.get("question") or ""), tuple(str(t) for t in data.get("target") or ()))

    def carried_by(self, parts: Sequence[str]) -> bool:
        """Whether a call's output (in parts, see `reply_parts`) carries this case's answer, or, with a repair
        target, produces what the repair adds (module doc)."""
        if self.target:
            return all(any(item_share(item, part) >= TARGET_SHARE for part in parts) for item in self.target)
        if self.question:
            return NeededInfo(self.question, self.gold).holds(list(parts))
        return carries(self.gold, " ".join(parts))


@dataclass(frozen=True)
class LocalResult:
    """The check of one candidate: blamed calls it made carry the answer (`fixed`, of `blamed` that did not),
    correct cases' calls it made lose it (`broken`, of `kept` that did), LM calls spent."""

    blamed: int
    fixed: int
    kept: int
    broken: int
    lm_calls: int
    targets: int = 0  # blamed calls checked against a confirmed repair rather than the gold answer

    @property
    def passed(self) -> bool:
        return self.blamed == 0 or self.fixed > self.broken

    @property
    def value(self) -> float:
        """Blamed calls fixed net of correct calls broken."""
        return float(self.fixed - self.broken)

    @property
    def why(self) -> str:
        against = f" ({self.targets} checked against their repair)" if self.targets else ""
        summary = (f"{self.fixed} of {self.blamed} blamed calls now carry the gold answer{against}, "
                   f"{self.broken} of {self.kept} correct cases' calls lose it")
        if self.blamed == 0:
            return "local check skipped: no blamed call to re-run"
        return f"local check passed: {summary}" if self.passed else f"rejected by the local check: {summary}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def local_cases(
    predictor: str,
    evaluation: EvalResult,
    blame: Blame,
    memo: ReplayMemo,
    *,
    max_cases: int = 3,
    targets: Mapping[str, Sequence[str]] | None = None,
) -> list[LocalCase]:
    """The calls a candidate for `predictor` is checked on: up to `max_cases` blamed calls (with `targets`, case
    id -> what its confirmed repair adds) and as many calls in correctly answered cases (`correct_calls`). Empty
    when `predictor` writes the answers (module doc)."""
    targets = targets or {}
    cases = evaluation.by_id()
    graphs = GraphCache(evaluation)
    blamed: list[LocalCase] = []
    for verdict in blame.by_predictor.get(predictor, []):
        case, seq = cases.get(verdict.case_id), op_seq(verdict.op_id)
        if case is None or seq is None or not answer_tokens(case.question.answer):
            continue
        if GraphView(graphs.get(case.conversation_key)).answer_op(case.case_id) == f"op:{seq}":
            return []  # the predictor writes the answers: its minibatch replay is already cheap
        event = op_event(evaluation, case.conversation_key, seq)
        exchange = memo.exchange(event.content_key) if event is not None else None
        if exchange is None:
            continue
        blamed.append(LocalCase(case.case_id, case.question.answer, exchange.prompt, exchange.response, True,
                                case.question.question, tuple(targets.get(case.case_id, ()))))
        if len(blamed) >= max_cases:
            break
    if not blamed:
        return []
    kept = [LocalCase(case.case_id, case.question.answer, exchange.prompt, exchange.response, False,
                      case.question.question)
            for case, exchange in itertools.islice(correct_calls(predictor, evaluation, memo), max_cases)]
    return [*blamed, *kept]


def reply_parts(adapter: Any, signature: Any, reply: str) -> list[str]:
    """A reply's parsed output fields in parts, as the graph holds an op's outputs: one part per item of a list
    (a fact), else one per field. A reply that does not parse has none."""
    try:
        parsed = adapter.parse(signature, reply)
    except Exception:  # noqa: BLE001 - a reply that does not parse carries nothing
        return []
    values = parsed.values() if isinstance(parsed, Mapping) else [parsed]
    return [part for value in values for part in value_parts(value)]


def _reply_text(output: Any) -> str:
    if isinstance(output, dict):
        return str(output.get("text") or "")
    return str(output or "")


def check_candidate(
    program: dspy.Module,
    predictor: str,
    instruction: str,
    cases: Sequence[LocalCase],
    lm: Any = None,
    demos: Sequence[Mapping[str, Any]] | None = None,
) -> LocalResult:
    """Re-runs `cases` under `instruction` for `predictor` of `program` (with `demos`, default its own), one call
    of `lm` (default: the configured LM) per distinct prompt, and counts what the candidate fixes and breaks. An op
    whose prompt another library builds (`LMOperation.adapter_prompt` False) cannot be re-run so: nothing is
    checked, and the candidate goes on to the replay."""
    if not getattr(predictor_op(program, predictor), "adapter_prompt", True):
        return LocalResult(blamed=0, fixed=0, kept=0, broken=0, lm_calls=0)
    target = dict(program.named_predictors())[predictor]
    signature = target.signature.with_instructions(instruction)
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    head = [{"role": "system", "content": adapter.format_system_message(signature)},
            *adapter.format_demos(signature, [dict(d) for d in (target.demos if demos is None else demos)])]
    lm = lm if lm is not None else dspy.settings.lm
    replies: dict[str, list[str]] = {}  # several cases blamed on one call share its re-run

    def rerun(case: LocalCase) -> bool:
        if case.prompt in replies:
            return case.carried_by(replies[case.prompt])
        messages = [*head, {"role": "user", "content": case.prompt}]
        try:
            with warnings.catch_warnings():  # the message form is what DSPy's own adapters send (dspy is pinned)
                warnings.simplefilter("ignore", DeprecationWarning)
                outputs = lm(messages=messages, **dict(target.config))  # the op's own reply cap
            reply = _reply_text(outputs[0]) if outputs else ""
        except Exception as error:  # noqa: BLE001 - a failed call is a call that carries nothing
            log.warning("local check of %s on %s: the call failed: %s", predictor, case.case_id, error)
            reply = ""
        replies[case.prompt] = reply_parts(adapter, signature, reply)
        return case.carried_by(replies[case.prompt])

    def before(case: LocalCase) -> bool:
        return case.carried_by(reply_parts(adapter, signature, case.response))

    # blamed calls that lost the answer, then correct cases' calls that carried it; stop once the verdict is sure
    to_fix = [c for c in cases if c.blamed and not before(c)]
    to_keep = [c for c in cases if not c.blamed and before(c)]
    fixed = sum(rerun(case) for case in to_fix)
    kept = broken = 0
    for case in to_keep if fixed else ():
        if broken >= fixed:
            break
        kept += 1
        broken += not rerun(case)
    blamed = len(to_fix)
    return LocalResult(blamed=blamed, fixed=fixed, kept=kept, broken=broken, lm_calls=len(replies),
                       targets=sum(bool(c.target) for c in to_fix))


@dataclass(frozen=True)
class LocalCheckGate:
    """The first gate of a candidate for an upstream predictor: its blamed calls (`cases`) re-run under it with
    `lm`; it passes when it fixes more than it breaks (`LocalResult.passed`)."""

    cases: Sequence[LocalCase]
    lm: Any = None

    def score(self, program: dspy.Module, candidate: Any) -> LocalResult:
        """The counts of `candidate` (a `Candidate`) on the blamed calls of `program`."""
        return check_candidate(program, candidate.predictor, candidate.instruction, self.cases, self.lm,
                               candidate.demo_list())

    def check(self, program: dspy.Module, candidate: Any) -> tuple[LocalResult, Decision]:
        """The check of `candidate` on `program`: its counts and the decision."""
        result = self.score(program, candidate)
        return result, Decision.of(Status.PASSED if result.passed else Status.REJECTED, "{result.why}", result=result)
