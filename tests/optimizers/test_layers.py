"""The optimizer's packages stay layered: each imports only the packages below it, and no two modules of the loop
import each other. A hidden cycle is what made the round's parts weld together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "optimizers"
PACKAGE = "memtrace_opt.optimizers."
# a package may import those before it in this order (top-level modules such as optimize.py sit above them all)
ORDER = ("core", "evaluation", "sources", "gates", "loop", "comparison")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, runtime_only: bool) -> set[str]:
    """The optimizer modules `path` imports (without `if TYPE_CHECKING:` blocks when `runtime_only`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                skipped |= {id(inner) for inner in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and id(node) not in skipped and (node.module or "").startswith(PACKAGE):
            found.add(node.module[len(PACKAGE):])  # type: ignore[index]
    return found


MODULES = {module_name(p): p for p in ROOT.rglob("*.py") if module_name(p)}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] in ORDER))
def test_a_package_imports_only_the_packages_below_it(module: str) -> None:
    layer = ORDER.index(module.split(".")[0])
    above = [target for target in imports(MODULES[module], runtime_only=False)
             if target.split(".")[0] not in ORDER or ORDER.index(target.split(".")[0]) > layer]
    assert above == [], f"{module} imports {above}, above its layer"


def test_no_two_modules_import_each_other() -> None:
    graph = {m: imports(p, runtime_only=False) for m, p in MODULES.items()}
    pairs = sorted((a, b) for a, targets in graph.items() for b in targets if b in graph and a in graph[b] and a < b)
    assert pairs == []


def test_the_layer_order_matches_the_tree() -> None:
    packages = {p.parent.name for p in ROOT.rglob("__init__.py") if p.parent != ROOT}
    assert packages == set(ORDER)
