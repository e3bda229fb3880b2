"""The package's own sources as tests read them: which files the distribution installs, and the docstrings among
a source's string literals (the tests that keep word lists in one home and benchmark text out of the package)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memtrace_opt", "programs", "optimizers", "benchmarks")  # the sources the distribution installs


def package_sources() -> Iterator[Path]:
    """Every Python file of the installed packages, in order."""
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def docstring_ids(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found
