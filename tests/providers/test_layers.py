"""The layout rules of docs/architecture.md, checked on the source: the engine is in layers, each a folder importing
only the layers below it; it never imports the screen; nothing imports itself back through others (every import
counts: at the top, inside a function, or only for type checking)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PROVIDERS = ROOT / "providers"
LAYERS: tuple[tuple[str, ...], ...] = (
    ("model",),
    ("timing",),
    ("metrics", "recording"),
    ("adapters",),
    ("config",),
    ("race",),
    ("loop", "voice", "traces"),
    ("runs",),
    ("export", "serve", "proxy"),
)
"""The engine's layers, lowest first: a folder imports its own modules and those of lower layers, never a folder of
its own layer or of one above."""
LAYER_OF: dict[str, int] = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
FORBIDDEN = ("textual", "textual_serve", "rich", "tokrace.tui", "tokrace.themes")
"""What the engine must never import: the screen, the terminal and the themes live above it."""
MAX_LINES = 600
"""A module longer than this does more than one job."""


def module_name(path: Path, root: Path = ROOT) -> str:
    """The installed name of a source file: ``providers/race/live.py`` is ``tokrace.providers.race.live``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(["tokrace", *(parts[:-1] if parts[-1] == "__init__" else parts)])


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


def graph(package: Path = PROVIDERS) -> dict[str, set[str]]:
    """Each module of a source folder and the modules of that folder it imports."""
    modules = {module_name(p): p for p in package.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}


def folder_of(module: str) -> str | None:
    """The layer folder a module lives in (``race`` for ``tokrace.providers.race.live``, ``recording`` for the
    ``tokrace.providers.recording`` face), ``None`` for the root."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else None


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


def layer_offences(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports against the layer order: into a folder of the same layer or of a higher one."""
    offences = []
    for module, targets in edges.items():
        here = folder_of(module)
        for imported in targets:
            there = folder_of(imported)
            if here is None or there is None or here == there:
                continue
            if LAYER_OF[there] >= LAYER_OF[here]:
                offences.append((module, imported))
    return sorted(offences)


def test_every_folder_of_the_engine_is_a_layer() -> None:
    folders = {p.name for p in PROVIDERS.iterdir() if (p / "__init__.py").is_file()}
    assert folders <= set(LAYER_OF)
    assert {"model", "timing", "adapters", "race", "export"} <= folders


def test_the_root_of_the_engine_holds_only_its_version() -> None:
    assert sorted(p.name for p in PROVIDERS.glob("*.py")) == ["__init__.py"]
    assert imports_of(PROVIDERS / "__init__.py") == set()


def test_no_import_runs_against_the_layer_order() -> None:
    assert layer_offences(graph()) == []


def test_the_layer_check_sees_an_import_up_and_one_across() -> None:
    edges = {"tokrace.providers.model.events": {"tokrace.providers.race.live"},
             "tokrace.providers.loop.scenario": {"tokrace.providers.voice.lens", "tokrace.providers.race.race"},
             "tokrace.providers.race.race": {"tokrace.providers.race.live", "tokrace.providers.model.events"}}
    assert layer_offences(edges) == [("tokrace.providers.loop.scenario", "tokrace.providers.voice.lens"),
                                     ("tokrace.providers.model.events", "tokrace.providers.race.live")]


def test_the_layer_check_sees_an_import_of_a_folders_face() -> None:
    edges = {"tokrace.providers.model.events": {"tokrace.providers.recording"},
             "tokrace.providers.race.race": {"tokrace.providers.recording", "tokrace.providers.race"}}
    assert layer_offences(edges) == [("tokrace.providers.model.events", "tokrace.providers.recording")]


def test_the_engine_never_imports_the_screen() -> None:
    offenders = sorted(
        (module_name(path), imported)
        for path in PROVIDERS.rglob("*.py")
        for imported in imports_of(path)
        if any(imported == name or imported.startswith(f"{name}.") for name in FORBIDDEN)
    )
    assert offenders == []


@pytest.mark.parametrize("package", ["providers", "tui", "themes"])
def test_there_are_no_import_circles(package: str) -> None:
    assert find_cycle(graph(ROOT / package)) is None


def test_the_circle_finder_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_resolve_to_real_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "providers" / "adapters" / "http"
    pkg.mkdir(parents=True)
    source = pkg / "sse.py"
    source.write_text("from ...model.events import Delta\nfrom . import provider\nimport textual.app\n")
    assert {"tokrace.providers.model.events", "tokrace.providers.adapters.http.provider",
            "textual.app"} <= imports_of(source, tmp_path)


@pytest.mark.parametrize("package", ["providers", "tui", "themes"])
def test_no_module_does_several_jobs_by_length(package: str) -> None:
    long = sorted((str(p.relative_to(ROOT)), n) for p in (ROOT / package).rglob("*.py")
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert long == []


def test_the_install_names_everything_under_tokrace_and_nothing_bare(tmp_path: Path) -> None:
    script = ("import importlib\n"
              "import tokrace.providers, tokrace.tui, tokrace.themes\n"
              "for bare in ('providers', 'tui', 'themes'):\n"
              "    try:\n"
              "        importlib.import_module(bare)\n"
              "    except ImportError:\n"
              "        continue\n"
              "    raise SystemExit(f'{bare} imported')\n")
    for where in (tmp_path, ROOT):  # outside the checkout, and inside it, where the bare folders are on the path
        done = subprocess.run([sys.executable, "-c", script], cwd=where, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
