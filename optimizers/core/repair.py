"""A confirmed repair of a blamed call, as a plain value: what the call should have produced (`Repair`), and what
became of the calls a round tried to repair (`RepairCounts`). How repairs are found: `evaluation/repairs.py`; how a
round confirms them on its local calls: `loop/steps.py`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from memtrace_opt.optimizers.core.evidence import prompt_fields

__all__ = ["REPAIR_CHARS", "Repair", "RepairCounts", "RepairSet"]

REPAIR_CHARS = 4000  # a repair demo shows one window of turns, not a session: about 1k tokens per demo


@dataclass(frozen=True)
class Repair:
    """One repair of a blamed call: the case, the call (`op_id`, its op and predictor), the user message it was
    shown and its reply, the repaired reply's output fields as the LM would write them (`reply`), what the repair
    adds (`added`: facts, or the texts of added actions) and `answer` (kept for records an earlier release wrote;
    "" now)."""

    case_id: str
    op_id: str
    op: str
    predictor: str
    prompt: str
    response: str
    reply: Mapping[str, str]
    added: tuple[str, ...]
    answer: str

    def demo(self, signature: Any) -> dict[str, str] | None:
        """The demo of this repair for `signature`: the recorded call's input fields and the repaired reply, or
        None when a field is missing or the demo passes `REPAIR_CHARS`."""
        sections = prompt_fields(self.prompt)
        demo: dict[str, str] = {}
        for name in signature.input_fields:
            if name not in sections:
                return None
            demo[name] = sections[name]
        for name in signature.output_fields:
            if name not in self.reply:
                return None
            demo[name] = self.reply[name]
        return demo if sum(len(v) for v in demo.values()) <= REPAIR_CHARS else None

    def target(self) -> str:
        """What the call should have produced, as the reflection LM is shown it."""
        return "\n".join(f"{name}: {text}" for name, text in self.reply.items())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reply"], out["added"] = dict(self.reply), list(self.added)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Repair:
        return cls(str(data["case_id"]), str(data["op_id"]), str(data.get("op") or ""), str(data["predictor"]),
                   str(data.get("prompt") or ""), str(data.get("response") or ""),
                   {str(k): str(v) for k, v in (data.get("reply") or {}).items()},
                   tuple(str(a) for a in data.get("added") or ()), str(data.get("answer") or ""))


@dataclass(frozen=True)
class RepairCounts:
    """What became of the blamed calls tried: no rule repair (`no_repair`), the call's own output already held the
    needed information (`lineage_rejected`), no demo form (`no_demo`), not confirmed on the local calls
    (`not_confirmed`: the repair as a demo lost more targets than it carried), kept (`kept`, the confirmed); the LM
    calls the confirmation spent (`lm_calls`)."""

    tried: int = 0
    no_repair: int = 0
    not_confirmed: int = 0
    lineage_rejected: int = 0
    no_demo: int = 0
    kept: int = 0
    lm_calls: int = 0

    @property
    def confirmed(self) -> int:
        return self.kept

    def to_dict(self) -> dict[str, int]:
        return {**asdict(self), "confirmed": self.confirmed}


@dataclass
class RepairSet:
    repairs: list[Repair] = field(default_factory=list)
    counts: RepairCounts = field(default_factory=RepairCounts)
