"""The comparison chart: what a reader needs is on it, and it is a real PNG."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest
from matplotlib.container import ErrorbarContainer

from memtrace_opt.optimizers.comparison.plot import (
    PlotPoint,
    draw_chart,
    plot_accuracy_vs_calls,
    points_from_rows,
)


def test_points_carry_the_paired_interval_on_the_accuracy_axis():
    rows = [SimpleNamespace(optimizer="memtrace", lm_calls=158, optimized_accuracy=0.571,
                            paired=SimpleNamespace(low=0.0, high=0.16)),
            SimpleNamespace(optimizer="gepa", lm_calls=200, optimized_accuracy=None, paired=None),  # failed
            SimpleNamespace(optimizer="bootstrap", lm_calls=1, optimized_accuracy=0.5, paired=None)]
    points = points_from_rows(rows, baseline=0.492)
    assert [p.label for p in points] == ["memtrace", "bootstrap"]
    assert points[0].low == pytest.approx(0.492) and points[0].high == pytest.approx(0.652)
    assert (points[1].low, points[1].high) == (None, None)
    assert points_from_rows(rows[:1], baseline=None)[0].low is None  # no baseline, no interval to move


def test_chart_has_title_labels_error_bars_baseline_and_accuracies():
    points = [PlotPoint("memtrace", 158, 0.571, 0.492, 0.652), PlotPoint("gepa", 200, 0.524),
              PlotPoint("mipro", 200, 0.508, 0.442, 0.572)]
    fig = draw_chart(points, 0.492, "long_context: held-out accuracy vs LM calls")
    ax = fig.axes[0]
    assert ax.get_title() == "long_context: held-out accuracy vs LM calls"
    assert "LM calls" in ax.get_xlabel() and "held-out accuracy" in ax.get_ylabel()
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert [c.get_label() for c in bars] == ["memtrace", "gepa", "mipro"]
    segments = bars[0].lines[2][0].get_segments()  # memtrace's vertical bar: low to high
    assert segments[0][0][1] == pytest.approx(0.492) and segments[0][1][1] == pytest.approx(0.652)
    assert bars[1].has_yerr is False  # no interval, no bar
    gepa_x, mipro_x = (c.lines[0].get_xdata()[0] for c in bars[1:])
    assert gepa_x != mipro_x and abs(gepa_x - mipro_x) < 10  # same calls: spread apart, still at ~200
    baseline = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(baseline) == 1 and baseline[0].get_ydata()[0] == pytest.approx(0.492)
    texts = {t.get_text() for t in ax.texts}
    assert {"0.571", "0.524", "0.508"} <= texts  # each optimizer's accuracy written beside it
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "unoptimized (0.492)" in legend and "memtrace" in legend
    low, high = ax.get_ylim()
    assert 0.0 <= low < 0.492 and 0.652 < high <= 1.0  # every bar fits


def test_chart_is_written_as_a_png(tmp_path):
    path = plot_accuracy_vs_calls([PlotPoint("memtrace", 10, 0.6, 0.5, 0.7)], 0.3, tmp_path / "compare.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (864, 552)  # 7.2 x 4.6 inches at 120 dpi
    assert plt.get_fignums() == []  # never registered with pyplot: a long compare run piles up no figures


def test_empty_chart_still_writes(tmp_path):
    path = plot_accuracy_vs_calls([], None, tmp_path / "empty.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_labels_of_points_at_the_same_place_do_not_cover_each_other():
    points = [PlotPoint("optuna_blind", 400, 0.28), PlotPoint("gepa", 400, 0.28), PlotPoint("mipro", 398, 0.28),
              PlotPoint("bootstrap", 0, 0.33)]
    fig = draw_chart(points, 0.28)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    assert len(boxes) == 4
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    offsets = [t.xyann for t in fig.axes[0].texts]
    assert offsets[0] == (7, 4) and offsets[3] == (7, 4)  # a label nothing covers stays beside its point
    assert offsets[1][1] > 4 and offsets[2][1] > 4  # the two that would cover the first are raised
