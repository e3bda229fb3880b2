"""The comparison plot: held-out accuracy against LM calls, one point per optimizer, baseline as a line.

Uses matplotlib when it is installed; otherwise draws the same chart with a tiny pure-Python PNG writer
(axes, grid, a dashed baseline, one colored marker per optimizer and a legend drawn as color swatches with
3x5-pixel-font labels), so the command never needs an extra dependency.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PlotPoint", "plot_accuracy_vs_calls", "write_png"]

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
          (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


@dataclass(frozen=True)
class PlotPoint:
    label: str
    lm_calls: float
    accuracy: float


def plot_accuracy_vs_calls(points: Sequence[PlotPoint], baseline: float | None, path: str | Path,
                           title: str = "held-out accuracy vs LM calls") -> Path:
    path = Path(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _plot_plain(points, baseline, path)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for i, p in enumerate(points):
        ax.scatter([p.lm_calls], [p.accuracy], color=[c / 255 for c in COLORS[i % len(COLORS)]], label=p.label, s=50)
    if baseline is not None:
        ax.axhline(baseline, color="gray", linestyle="--", label="baseline")
    ax.set_xlabel("LM calls (task + reflection [+ attributor])")
    ax.set_ylabel("held-out accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# a pure-Python fallback ---------------------------------------------------------------------------------
_FONT = {  # 3x5 glyphs, rows top to bottom, 3 bits each
    "a": "010101111101101", "b": "110101110101110", "c": "011100100100011", "d": "110101101101110",
    "e": "111100110100111", "f": "111100110100100", "g": "011100101101011", "h": "101101111101101",
    "i": "111010010010111", "j": "001001001101010", "k": "101101110101101", "l": "100100100100111",
    "m": "101111111101101", "n": "110101101101101", "o": "010101101101010", "p": "110101110100100",
    "q": "010101101110011", "r": "110101110101101", "s": "011100010001110", "t": "111010010010010",
    "u": "101101101101111", "v": "101101101101010", "w": "101101111111101", "x": "101101010101101",
    "y": "101101010010010", "z": "111001010100111", "0": "111101101101111", "1": "010110010010111",
    "2": "110001010100111", "3": "110001010001110", "4": "101101111001001", "5": "111100110001110",
    "6": "011100111101111", "7": "111001010010010", "8": "111101111101111", "9": "111101111001110",
    "_": "000000000000111", "-": "000000111000000", ".": "000000000000010", " ": "000000000000000",
}


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray([255] * (width * height * 3))

    def set(self, x: int, y: int, color: tuple[int, int, int]) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i:i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        for y in range(min(y0, y1), max(y0, y1) + 1):
            for x in range(min(x0, x1), max(x0, x1) + 1):
                self.set(x, y, color)

    def text(self, x: int, y: int, text: str, color: tuple[int, int, int] = (0, 0, 0), scale: int = 2) -> None:
        for n, char in enumerate(text.lower()):
            glyph = _FONT.get(char, _FONT[" "])
            for row in range(5):
                for col in range(3):
                    if glyph[row * 3 + col] == "1":
                        base_x, base_y = x + (n * 4 + col) * scale, y + row * scale
                        self.rect(base_x, base_y, base_x + scale - 1, base_y + scale - 1, color)


def write_png(path: Path, width: int, height: int, rgb: bytes) -> Path:
    """An 8-bit RGB PNG from raw rows of pixels."""
    raw = b"".join(b"\x00" + rgb[y * width * 3:(y + 1) * width * 3] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                     + chunk(b"IEND", b""))
    return path


def _plot_plain(points: Sequence[PlotPoint], baseline: float | None, path: Path) -> Path:
    width, height, left, right, top, bottom = 640, 420, 60, 180, 30, 50
    canvas = _Canvas(width, height)
    x_max = max([p.lm_calls for p in points] + [1.0]) * 1.1
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(calls: float, acc: float) -> tuple[int, int]:
        return left + int(calls / x_max * plot_w), top + int((1.0 - acc) * plot_h)

    for tick in range(0, 11, 2):
        _, y = px(0, tick / 10)
        canvas.rect(left, y, left + plot_w, y, (225, 225, 225))
        canvas.text(8, y - 4, f"{tick / 10:.1f}")
    canvas.rect(left, top, left, top + plot_h, (0, 0, 0))
    canvas.rect(left, top + plot_h, left + plot_w, top + plot_h, (0, 0, 0))
    for tick in range(5):
        calls = x_max * tick / 4
        x, _ = px(calls, 0)
        canvas.rect(x, top + plot_h, x, top + plot_h + 4, (0, 0, 0))
        canvas.text(x - 8, top + plot_h + 8, f"{calls:.0f}")
    canvas.text(left + plot_w // 2 - 40, height - 18, "lm calls")
    if baseline is not None:
        _, y = px(0, baseline)
        for x in range(left, left + plot_w, 8):
            canvas.rect(x, y, x + 3, y, (120, 120, 120))
    for i, point in enumerate(points):
        color = COLORS[i % len(COLORS)]
        x, y = px(point.lm_calls, point.accuracy)
        canvas.rect(x - 3, y - 3, x + 3, y + 3, color)
        legend_y = top + 14 * i
        canvas.rect(width - right + 12, legend_y, width - right + 20, legend_y + 8, color)
        canvas.text(width - right + 26, legend_y, point.label[:18])
    if baseline is not None:
        legend_y = top + 14 * len(points)
        canvas.rect(width - right + 12, legend_y + 4, width - right + 20, legend_y + 4, (120, 120, 120))
        canvas.text(width - right + 26, legend_y, "baseline")
    return write_png(path, width, height, bytes(canvas.pixels))
