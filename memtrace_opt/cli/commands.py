# ruff: noqa: I001  (the import order is the order of `memtrace --help`)
"""Imports every command module so each registers its commands on the app (in `memtrace --help` order)."""

from __future__ import annotations

from memtrace_opt.cli import (  # noqa: F401
    doctor,
    run_cmd,
    attribute_cmd,
    report_cmd,
    serve_cmd,
    serve_model_cmd,
    export_cmd,
    optimize_cmd,
    data_cmd,
    graph_cmd,
    bench_cmd,
    bench_import_cmd,
)
