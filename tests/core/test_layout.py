"""The layout rules of DESIGN §1, checked on the source: the engine never imports the UI, a subpackage never
imports a sibling subpackage, and no module imports itself back through others (every import counts: at the top,
inside a function, or only for type checking)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PROVIDERS = ROOT / "providers"
FORBIDDEN = ("textual", "tui", "themes")
"""Top-level packages the engine must never import."""


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every module a file imports, absolute, wherever the import statement sits."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            found.add(stem)
            # `from . import tokens` imports a module, not a name
            found.update(f"{stem}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PROVIDERS.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def subpackage(module: str) -> str | None:
    """The subpackage a module lives in (``http`` for ``providers.http.sse``), ``None`` for the core."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else None


def test_the_engine_never_imports_the_ui() -> None:
    offenders = sorted(
        (module_name(path), imported)
        for path in PROVIDERS.rglob("*.py")
        for imported in imports_of(path)
        if imported.split(".")[0] in FORBIDDEN
    )
    assert offenders == []


def test_no_subpackage_imports_a_sibling() -> None:
    offenders = sorted(
        (module, imported)
        for module, targets in graph().items()
        for imported in targets
        if subpackage(module) and subpackage(imported) and subpackage(module) != subpackage(imported)
    )
    assert offenders == []


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph, as the list of modules around it, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_there_are_no_import_circles() -> None:
    assert find_cycle(graph()) is None


def test_the_circle_finder_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("folder", ["http", "serve", "loop", "voice"])
def test_each_part_is_a_subpackage_of_its_own(folder: str) -> None:
    assert (PROVIDERS / folder / "__init__.py").is_file()
    assert any(subpackage(m) == folder for m in graph())


def test_relative_imports_resolve_to_real_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "providers" / "http"
    pkg.mkdir(parents=True)
    source = pkg / "sse.py"
    source.write_text("from ..events import Delta\nfrom . import provider\nimport textual.app\n")
    assert {"providers.events", "providers.http.provider", "textual.app"} <= imports_of(source, tmp_path)


@pytest.mark.parametrize("package", ["themes"])
def test_the_app_has_no_import_circles_either(package: str) -> None:
    modules = {module_name(p): p for p in (ROOT / package).rglob("*.py")}
    edges = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    assert find_cycle(edges) is None
