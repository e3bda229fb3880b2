"""One shape for the accuracy a manifest records, whichever writer produced it.

Accepted: `{overall: {...}, by_category: {cat: {...}}}` or `{overall: {...}, rows: [{category, ...}]}`, with
metric names `f1`/`mean_f1`, `bleu1`/`mean_bleu1`, `judge`/`judge_accuracy`, `accuracy`/`rule_accuracy`.
Result: `{overall: Block, by_category: {cat: Block}}`, Block = `{count, f1, bleu1, judge, accuracy, judged}`
(missing metrics are None).
"""

from __future__ import annotations

from typing import Any

__all__ = ["normalize_accuracy", "accuracy_from_cases"]

_ALIASES = {
    "count": ("count", "n", "questions"),
    "f1": ("f1", "mean_f1"),
    "bleu1": ("bleu1", "mean_bleu1", "bleu"),
    "judge": ("judge", "judge_accuracy", "mean_judge"),
    "accuracy": ("accuracy", "rule_accuracy", "acc"),
    "judged": ("judged",),
}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _block(raw: Any) -> dict[str, float | None]:
    raw = raw if isinstance(raw, dict) else {}
    out: dict[str, float | None] = {}
    for name, keys in _ALIASES.items():
        out[name] = next((v for k in keys if (v := _number(raw.get(k))) is not None), None)
    return out


def normalize_accuracy(accuracy: Any) -> dict[str, Any]:
    """See the module docstring. Anything unreadable gives empty blocks, never an error."""
    accuracy = accuracy if isinstance(accuracy, dict) else {}
    by_category: dict[str, dict[str, float | None]] = {}
    if isinstance(accuracy.get("by_category"), dict):
        by_category = {str(k): _block(v) for k, v in accuracy["by_category"].items()}
    elif isinstance(accuracy.get("rows"), list):
        by_category = {str(r.get("category")): _block(r) for r in accuracy["rows"]
                       if isinstance(r, dict) and r.get("category") not in (None, "overall")}
    return {"overall": _block(accuracy.get("overall")), "by_category": by_category}


def accuracy_from_cases(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The same shape computed from cases.jsonl rows (when the manifest has none)."""

    def block(rows: list[dict[str, Any]]) -> dict[str, float | None]:
        out: dict[str, float | None] = {"count": float(len(rows)),
                                        "accuracy": sum(bool(r.get("correct")) for r in rows) / len(rows)}
        for metric in ("f1", "bleu1", "judge"):
            vals = [v for r in rows if (v := _number((r.get("scores") or {}).get(metric))) is not None]
            out[metric] = sum(vals) / len(vals) if vals else None
        out["judged"] = float(sum(_number((r.get("scores") or {}).get("judge")) is not None for r in rows))
        return out

    if not cases:
        return {"overall": _block({}), "by_category": {}}
    grouped: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        grouped.setdefault(str(case.get("category") or "?"), []).append(case)
    return {"overall": block(cases), "by_category": {k: block(v) for k, v in grouped.items()}}
