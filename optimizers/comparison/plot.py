"""The comparison chart (`compare.png`): each optimizer's held-out accuracy against the LM calls it spent.

One point per optimizer with its paired 95% interval as an error bar (the interval of the change against the
unoptimized program, moved onto the accuracy axis), the unoptimized program's accuracy as a dashed line, the
accuracy written beside each point. Optimizers that spent the same calls are spread a little apart so their bars
do not hide each other, and a label that would cover another is raised above it. Drawn on matplotlib's Agg canvas
without pyplot: no display is needed, and the backend or figures of a notebook that imports this module are left
alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

__all__ = ["PlotPoint", "draw_chart", "plot_accuracy_vs_calls", "points_from_rows"]


@dataclass(frozen=True)
class PlotPoint:
    """One optimizer on the chart; `low`/`high` bound its held-out accuracy (both or neither)."""

    label: str
    lm_calls: float
    accuracy: float
    low: float | None = None
    high: float | None = None


class _Interval(Protocol):
    low: float
    high: float


class _Row(Protocol):
    optimizer: str
    lm_calls: int
    optimized_accuracy: float | None
    paired: _Interval | None


def points_from_rows(rows: Iterable[_Row], baseline: float | None) -> list[PlotPoint]:
    """The chart's points from comparison rows: the paired interval of each change, moved onto accuracy."""
    points = []
    for row in rows:
        if row.optimized_accuracy is None:  # the optimizer failed: its row says why, the chart leaves it out
            continue
        low = high = None
        if row.paired is not None and baseline is not None:
            low, high = baseline + row.paired.low, baseline + row.paired.high
        points.append(PlotPoint(row.optimizer, row.lm_calls, row.optimized_accuracy, low, high))
    return points


def plot_accuracy_vs_calls(points: Sequence[PlotPoint], baseline: float | None, path: str | Path,
                           title: str = "held-out accuracy vs LM calls", measure: str = "held-out accuracy") -> Path:
    """Write the chart as a PNG at `path` and return the path."""
    path = Path(path)
    draw_chart(points, baseline, title, measure).savefig(path)
    return path


def draw_chart(points: Sequence[PlotPoint], baseline: float | None,
               title: str = "held-out accuracy vs LM calls", measure: str = "held-out accuracy") -> Figure:
    """The chart as a matplotlib figure on an Agg canvas (not registered with pyplot: nothing to close); `measure`
    names the accuracy on the y axis (held-out, or same-conversation questions)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.6), dpi=120)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if baseline is not None:
        ax.axhline(baseline, color="0.45", linestyle="--", linewidth=1.2, label=f"unoptimized ({baseline:.3f})")
    x_max = max([p.lm_calls for p in points] + [1.0])
    labels = []
    for i, (point, x) in enumerate(zip(points, _dodged(points, 0.015 * x_max), strict=True)):
        color = f"C{i % 10}"
        yerr = None
        if point.low is not None and point.high is not None:
            yerr = [[max(point.accuracy - point.low, 0.0)], [max(point.high - point.accuracy, 0.0)]]
        ax.errorbar([x], [point.accuracy], yerr=yerr, fmt="o", color=color, capsize=4, markersize=7,
                    label=point.label)
        labels.append(ax.annotate(f"{point.accuracy:.3f}", (x, point.accuracy), textcoords="offset points",
                                  xytext=(7, 4), fontsize=8, color=color))
    ax.set_xlabel("LM calls spent (task + reflection + attributor)")
    ax.set_ylabel(f"{measure} (error bar: paired 95% interval)")
    ax.set_title(title)
    ax.set_xlim(-0.03 * x_max, 1.12 * x_max)  # room for a point at 0 calls and the labels on the right
    ax.set_ylim(*_accuracy_range(points, baseline))
    ax.grid(alpha=0.3)
    if points or baseline is not None:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    _raise_covering(canvas.get_renderer(), labels)
    return fig


def _raise_covering(renderer: RendererAgg, labels: Sequence[Annotation]) -> None:
    """Raise each label that covers one placed before it until it covers none (points with the same accuracy and
    nearly the same calls would print their figures on top of each other)."""
    placed: list[Bbox] = []
    for label in labels:
        for _ in range(len(placed)):
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            x, y = label.xyann
            label.xyann = (x, y + 10)
        placed.append(label.get_window_extent(renderer))


def _dodged(points: Sequence[PlotPoint], step: float) -> list[float]:
    """Each point's x, spread by `step` where several optimizers spent the same calls (their bars would overlap)."""
    same: dict[float, list[int]] = {}
    for i, point in enumerate(points):
        same.setdefault(point.lm_calls, []).append(i)
    xs = [p.lm_calls for p in points]
    for group in same.values():
        for k, i in enumerate(group):
            xs[i] += (k - (len(group) - 1) / 2) * step
    return xs


def _accuracy_range(points: Sequence[PlotPoint], baseline: float | None) -> tuple[float, float]:
    values = [baseline] if baseline is not None else []
    for point in points:
        values += [v for v in (point.accuracy, point.low, point.high) if v is not None]
    if not values:
        return 0.0, 1.0
    pad = max(0.05, (max(values) - min(values)) * 0.15)
    return max(0.0, min(values) - pad), min(1.0, max(values) + pad)
