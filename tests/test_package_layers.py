"""The package stays layered: each top-level package of `memtrace_opt` (the mapped `programs`, `optimizers` and
`benchmarks` among them) imports, at module level, only packages of its own layer or below, so no two of them import
each other and the low layers load without the high ones. A function may still import a package above it where it
needs it lazily (the CLI's commands, the fake engine `build_lm` serves); `tests/optimizers/test_layers.py` holds the
optimizer's own, stricter order."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = (
    ("errors", "redact", "text", "embed", "_runlock", "progress"),
    ("rundir", "data", "lm", "config_schema"),
    ("metrics", "memory", "config"),
    ("testing", "tracing", "programs"),
    ("attribution", "estimate", "runner"),
    ("report", "optimizers"),
    ("export", "benchmarks"),
    ("api", "cli", "console", "__init__", "__main__"),
)
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}
MAPPED = {"programs": REPO / "programs", "optimizers": REPO / "optimizers", "benchmarks": REPO / "benchmarks"}


def sources() -> dict[str, list[Path]]:
    """Each top-level package (or module) of the installed package, with its files."""
    out: dict[str, list[Path]] = {}
    for path in (REPO / "memtrace_opt").rglob("*.py"):
        out.setdefault(path.relative_to(REPO / "memtrace_opt").parts[0].removesuffix(".py"), []).append(path)
    for name, folder in MAPPED.items():
        out[name] = list(folder.rglob("*.py"))
    return out


def module_level_imports(path: Path) -> set[str]:
    """The top-level packages of `memtrace_opt` that `path` imports at module level (not under TYPE_CHECKING)."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memtrace_opt."):
            found.add(node.module.split(".")[1])  # type: ignore[union-attr]
        elif isinstance(node, ast.ImportFrom) and node.module == "memtrace_opt":  # from memtrace_opt import progress
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("memtrace_opt.")}
    return found


PACKAGES = sources()


def test_every_package_has_a_layer():
    assert set(PACKAGES) <= set(LAYER), f"no layer for {sorted(set(PACKAGES) - set(LAYER))}"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_only_its_layer_and_below_at_module_level(package: str):
    above = sorted({f"{path.relative_to(REPO)} -> {target}" for path in PACKAGES[package]
                    for target in module_level_imports(path)
                    if target != package and LAYER.get(target, -1) > LAYER[package]})
    assert above == [], f"{package} (layer {LAYER[package]}) imports above it: {above}"


def test_no_two_packages_import_each_other_at_module_level():
    graph = {name: {t for p in paths for t in module_level_imports(p)} - {name} for name, paths in PACKAGES.items()}
    pairs = sorted((a, b) for a, targets in graph.items() for b in targets if b in graph and a in graph[b] and a < b)
    assert pairs == []
