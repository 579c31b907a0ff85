"""The command line never imports Textual: not itself, not through anything it imports (every import counts: at the
top, inside a function, or only for type checking), and not when it runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TUI = ROOT / "tui"
TEXTUAL = ("textual", "tokrace.tui.app")
"""Textual, and the app built on it: the command line reaches the app only through the screen it is handed."""

sys.path.insert(0, str(ROOT / "tests" / "providers"))
from test_layers import imports_of, module_name  # noqa: E402


def reachable_from(start: set[str]) -> dict[str, set[str]]:
    """Every module of tokrace reached from ``start`` by following imports, with the outside modules each imports."""
    sources = {module_name(p): p for p in [*(ROOT / "providers").rglob("*.py"), *TUI.rglob("*.py"),
                                             *(ROOT / "themes").rglob("*.py")]}
    seen: dict[str, set[str]] = {}
    todo = list(start)
    while todo:
        name = todo.pop()
        if name in seen or name not in sources:
            continue
        found = imports_of(sources[name])
        seen[name] = {m for m in found if m not in sources}
        todo.extend(m for m in found if m in sources)
        todo.extend(m.rsplit(".", 1)[0] for m in found if m.rsplit(".", 1)[0] in sources)  # a package's face
    return seen


def offenders(start: set[str]) -> list[tuple[str, str]]:
    found = [(module, imported) for module, outside in reachable_from(start).items() for imported in outside
             if any(imported == name or imported.startswith(f"{name}.") for name in TEXTUAL)]
    found += [(module, module) for module in reachable_from(start) if module.startswith("tokrace.tui.app")]
    return sorted(found)


def test_no_module_of_the_command_line_reaches_textual() -> None:
    cli = {module_name(p) for p in (TUI / "cli").rglob("*.py")}
    assert len(cli) > 10
    assert offenders(cli) == []


def test_the_check_sees_textual_behind_another_module() -> None:
    assert ("tokrace.tui.app.app", "textual.app") in offenders({"tokrace.tui.app.launch", "tokrace.tui.app.app"})


def test_bench_runs_without_loading_textual(tmp_path: Path) -> None:
    script = ("import sys\n"
              "from tokrace.tui.main import main\n"
              "code = main(['bench', '--fast-forward', '--no-record', '--max-tokens', '20', '--json', 'out.json'])\n"
              "loaded = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
              "print(code, loaded)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                               "XDG_DATA_HOME": str(tmp_path / "data")})
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
    assert (tmp_path / "out.json").is_file()
