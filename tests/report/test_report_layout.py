"""The layered layout: time reads left to right, nothing overlaps."""

from __future__ import annotations

from memtrace_opt.report._layout import COLUMN_WIDTH, ROW_HEIGHT, layered_layout


def test_ops_run_left_to_right_in_execution_order_and_values_sit_between() -> None:
    nodes = ["turn:a", "turn:b", "op:0", "var:0:facts", "op:1", "mem:u@1", "op:2", "mem:u@2", "q:x", "op:3", "ans:x"]
    ops = {"op:0": 0, "op:1": 1, "op:2": 2, "op:3": 3}
    edges = [("turn:a", "op:0", "input"), ("turn:b", "op:0", "input"), ("op:0", "var:0:facts", "output"),
             ("var:0:facts", "op:1", "input"), ("op:1", "mem:u@1", "output"), ("mem:u@1", "op:2", "input"),
             ("op:2", "mem:u@2", "output"), ("mem:u@2", "op:3", "input"), ("q:x", "op:3", "input"),
             ("op:3", "ans:x", "output")]
    layout = layered_layout(nodes, ops, edges)
    x = {n: p[0] for n, p in layout.positions.items()}
    assert x["op:0"] < x["op:1"] < x["op:2"] < x["op:3"]
    for source, target, _ in edges:
        assert x[source] < x[target], (source, target)
    assert x["q:x"] == x["mem:u@2"]  # the question sits right before the op that reads it
    assert layout.width >= x["ans:x"] + COLUMN_WIDTH / 2
    assert abs(layout.positions["var:0:facts"][1] - layout.positions["op:1"][1]) < 1  # a chain runs straight


def test_nodes_of_a_column_never_overlap() -> None:
    nodes = ["op:0"] + [f"mem:u{i}@1" for i in range(9)] + ["op:1"]
    edges = [("op:0", f"mem:u{i}@1", "output") for i in range(9)] + [(f"mem:u{i}@1", "op:1", "input") for i in range(9)]
    layout = layered_layout(nodes, {"op:0": 0, "op:1": 1}, edges)
    ys = sorted(layout.positions[f"mem:u{i}@1"][1] for i in range(9))
    assert all(b - a >= ROW_HEIGHT - 1e-6 for a, b in zip(ys, ys[1:], strict=False))
    assert min(y for _, y in layout.positions.values()) > 0
    assert layout.height > ys[-1]


def test_empty_view() -> None:
    layout = layered_layout([], {}, [])
    assert layout.positions == {} and layout.width > 0
