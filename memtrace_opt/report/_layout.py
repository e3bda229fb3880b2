"""A layered left-to-right layout for a question's view, computed in Python so the page only draws.

Columns: every op has its own column, in execution order (`seq`), so time reads left to right. A value sits
in the column right after the op that produced it; a value no op in the view produced (a turn, the
question) sits right before the first op that reads it. Empty columns are dropped. Rows: a few sweeps of
barycentre averaging (each node moves toward the mean height of its neighbours), then overlaps in a column
are pushed apart, so chains (turn -> extract -> fact -> memory versions -> retrieval -> answer) run straight.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Layout", "layered_layout", "COLUMN_WIDTH", "ROW_HEIGHT"]

COLUMN_WIDTH = 168
ROW_HEIGHT = 54
MARGIN = 40
_SWEEPS = 8


@dataclass(frozen=True)
class Layout:
    positions: dict[str, tuple[float, float]]  # node -> centre (x, y)
    columns: dict[str, int]
    width: float
    height: float


def _columns(nodes: Sequence[str], ops: dict[str, int], edges: Iterable[tuple[str, str, str]]) -> dict[str, int]:
    rank = {op: i for i, op in enumerate(sorted(ops, key=lambda o: (ops[o], o)))}
    producers: dict[str, list[int]] = {}
    consumers: dict[str, list[int]] = {}
    for source, target, _ in edges:
        if source in rank and target not in rank:
            producers.setdefault(target, []).append(rank[source])
        elif target in rank and source not in rank:
            consumers.setdefault(source, []).append(rank[target])
    column: dict[str, int] = {}
    for node in nodes:
        if node in rank:
            column[node] = 2 * rank[node] + 1
        elif node in producers:
            column[node] = 2 * max(producers[node]) + 2
        elif node in consumers:
            column[node] = 2 * min(consumers[node])
        else:
            column[node] = 0
    used = sorted(set(column.values()))
    compact = {c: i for i, c in enumerate(used)}
    return {node: compact[c] for node, c in column.items()}


def _spread(desired: list[tuple[float, str]], gap: float) -> dict[str, float]:
    """Keeps the order of `desired`, pushes nodes apart to `gap`, and recentres the block on the wishes."""
    desired.sort()
    placed: list[float] = []
    for want, _ in desired:
        placed.append(want if not placed else max(want, placed[-1] + gap))
    shift = (sum(w for w, _ in desired) - sum(placed)) / len(placed)
    return {node: y + shift for (_, node), y in zip(desired, placed, strict=True)}


def layered_layout(nodes: Sequence[str], ops: dict[str, int], edges: Sequence[tuple[str, str, str]]) -> Layout:
    """`ops` maps op nodes to their seq; other nodes are values. `edges` are (source, target, role)."""
    if not nodes:
        return Layout({}, {}, 2 * MARGIN, 2 * MARGIN)
    column = _columns(nodes, ops, edges)
    by_column: dict[int, list[str]] = {}
    for node in nodes:
        by_column.setdefault(column[node], []).append(node)
    neighbours: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target, _ in edges:
        if source in neighbours and target in neighbours and source != target:
            neighbours[source].append(target)
            neighbours[target].append(source)
    y = {node: float(i * ROW_HEIGHT) for members in by_column.values() for i, node in enumerate(members)}
    order = sorted(by_column)
    for sweep in range(_SWEEPS):
        left_to_right = sweep % 2 == 0
        for col in order if left_to_right else reversed(order):
            wishes = []
            for node in by_column[col]:
                side = [y[n] for n in neighbours[node] if (column[n] < col if left_to_right else column[n] > col)]
                if not side:
                    side = [y[n] for n in neighbours[node] if column[n] != col]
                wishes.append((sum(side) / len(side) if side else y[node], node))
            y.update(_spread(wishes, ROW_HEIGHT))
    top = min(y.values())
    positions = {node: (MARGIN + COLUMN_WIDTH / 2 + column[node] * COLUMN_WIDTH, MARGIN + ROW_HEIGHT / 2 + y[node] - top)
                 for node in nodes}
    width = 2 * MARGIN + (max(column.values()) + 1) * COLUMN_WIDTH
    height = 2 * MARGIN + ROW_HEIGHT + max(y.values()) - top
    return Layout(positions, column, width, height)
