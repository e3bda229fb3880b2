"""The accuracy-by-round plot of an optimize run, as a small inline SVG (no script needed)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RoundPoint", "accuracy_plot_svg"]

_W, _H = 560, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 16, 36


@dataclass(frozen=True)
class RoundPoint:
    """`accuracy` is the program's validation accuracy after the round (round 0: the baseline);
    `candidates` the (val score, accepted) pairs tried in the round."""

    round: int
    accuracy: float | None
    accepted: bool
    candidates: tuple[tuple[float, bool], ...] = ()


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def accuracy_plot_svg(points: Sequence[RoundPoint]) -> str:
    """An SVG line of accuracy by round, accepted rounds as filled dots, candidates as small marks."""
    values = [p.accuracy for p in points if p.accuracy is not None]
    values += [score for p in points for score, _ in p.candidates]
    if not points or not values:
        return ""
    low, high = min(values), max(values)
    pad = max((high - low) * 0.15, 0.02)
    low, high = max(0.0, low - pad), min(1.0, high + pad) if high <= 1 else high + pad
    last = max(p.round for p in points) or 1
    first = min(p.round for p in points)

    def x(r: float) -> float:
        return _LEFT + (r - first) / max(last - first, 1) * (_W - _LEFT - _RIGHT)

    def y(v: float) -> float:
        return _TOP + (high - v) / (high - low or 1) * (_H - _TOP - _BOTTOM)

    parts = [f'<svg class="plot" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
             'aria-label="validation accuracy by round">']
    for i in range(5):
        v = low + (high - low) * i / 4
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                     f'<text class="tick" x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_fmt(100 * v)}%</text>')
    for p in points:
        parts.append(f'<text class="tick" x="{x(p.round):.1f}" y="{_H - 14}" text-anchor="middle">'
                     f'{"base" if p.round == 0 else p.round}</text>')
    line = [(x(p.round), y(p.accuracy)) for p in points if p.accuracy is not None]
    if len(line) > 1:
        parts.append('<polyline class="line" points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in line) + '"/>')
    for p in points:
        for score, accepted in p.candidates:
            cls = "cand accepted" if accepted else "cand"
            parts.append(f'<circle class="{cls}" cx="{x(p.round) - 10:.1f}" cy="{y(score):.1f}" r="3">'
                         f"<title>candidate val {html.escape(_fmt(100 * score))}%</title></circle>")
        if p.accuracy is not None:
            cls = "pt accepted" if p.accepted else "pt"
            label = f"round {p.round}" if p.round else "baseline"
            parts.append(f'<circle class="{cls}" cx="{x(p.round):.1f}" cy="{y(p.accuracy):.1f}" r="5">'
                         f"<title>{label}: {_fmt(100 * p.accuracy)}%</title></circle>")
    parts.append("</svg>")
    return "".join(parts)
