"""Textual's private internals are touched in ``tui/app/render/`` alone, and every one it touches is still there:
a Textual upgrade that moves one fails here, naming it, rather than somewhere in a frame."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import rich
import textual
from textual.app import App
from textual.screen import Screen
from textual.widget import Widget

from tokrace.tui.app.render import TESTED_TEXTUAL

ROOT = Path(__file__).resolve().parents[4]
APP = ROOT / "tui"
RENDER = APP / "app" / "render"
TEXTUAL_DIR = Path(textual.__file__).parent
ASSIGNED = re.compile(r"self\.(_[a-z]\w*)\s*(?::[^=\n]*)?=")
DEFINED = re.compile(r"def (_[a-z]\w*)\(")


def private_names(text: str) -> set[str]:
    """The private attribute names a source text gives its objects (``self._x = ...``, ``def _x(``)."""
    return set(ASSIGNED.findall(text)) | set(DEFINED.findall(text))


def textual_private(folder: Path = TEXTUAL_DIR) -> set[str]:
    return {name for f in folder.rglob("*.py") for name in private_names(f.read_text(encoding="utf-8"))}


def private_modules(tree: ast.AST) -> set[str]:
    """The private Textual modules a file imports (``textual._compositor``, ``textual.widgets._footer``)."""
    found = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        found |= {n for n in names if n.split(".")[0] == "textual" and any(p.startswith("_") for p in n.split("."))}
    return found


def private_uses(path: Path, textuals: set[str]) -> set[str]:
    """Textual's private attributes a file reaches for: private names of Textual's that the file does not give
    its own objects."""
    text = path.read_text(encoding="utf-8")
    own = private_names(text)
    return {node.attr for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Attribute)
            and node.attr.startswith("_") and not node.attr.startswith("__") and node.attr in textuals - own}


def test_only_render_imports_textuals_private_modules() -> None:
    outside = {str(p.relative_to(ROOT)): mods for p in APP.rglob("*.py") if RENDER not in p.parents
               and (mods := private_modules(ast.parse(p.read_text(encoding="utf-8"))))}
    assert outside == {}


def test_only_render_reaches_for_textuals_private_attributes() -> None:
    textuals = textual_private()
    outside = {str(p.relative_to(ROOT)): uses for p in APP.rglob("*.py") if RENDER not in p.parents
               and (uses := private_uses(p, textuals))}
    assert outside == {}


def test_the_check_sees_a_private_attribute_and_a_private_module(tmp_path: Path) -> None:
    source = tmp_path / "widget.py"
    source.write_text("from textual.widgets._footer import FooterKey\n"
                      "def draw(screen):\n    return screen._compositor, screen._mine\n"
                      "class Mine:\n    def __init__(self):\n        self._mine = 1\n")
    assert private_uses(source, textual_private()) == {"_compositor"}
    assert private_modules(ast.parse(source.read_text())) == {"textual.widgets._footer"}


def test_textual_is_the_release_line_the_internals_were_read_from() -> None:
    assert textual.__version__.startswith(TESTED_TEXTUAL), (
        f"Textual {textual.__version__} is installed; tui/app/render/ was written against {TESTED_TEXTUAL}x: "
        "check every private name it uses (these tests list them), then move TESTED_TEXTUAL and the pin")


def test_every_private_module_render_imports_is_there() -> None:
    wanted = {m for p in RENDER.rglob("*.py") for m in private_modules(ast.parse(p.read_text(encoding="utf-8")))}
    assert wanted, "render/ imports no private Textual module: drop this test and TESTED_TEXTUAL's pin"
    missing = []
    for module in sorted(wanted):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    assert missing == [], f"Textual {textual.__version__} no longer has {missing}, which tui/app/render/ imports"


def test_every_private_attribute_render_uses_is_still_textuals() -> None:
    textuals = textual_private() | textual_private(Path(rich.__file__).parent)  # and Rich's, under Textual
    used = set()
    for path in RENDER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= {node.attr for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Attribute)
                 and node.attr.startswith("_") and not node.attr.startswith("__")} - private_names(text)
    assert {"_compositor", "_dirty_widgets", "_batch_count", "_on_timer_update", "_display"} <= used
    gone = sorted(used - textuals)
    assert gone == [], f"Textual {textual.__version__} no longer defines {gone}, which tui/app/render/ uses"


def test_the_names_render_leans_on_hang_off_the_classes_it_expects() -> None:
    from textual._compositor import ChopsUpdate, Compositor, CompositorUpdate

    assert callable(Screen._on_timer_update) and callable(App._display) and callable(Widget._set_dirty)
    for name in ("_regions_to_spans", "_render_chops", "render_update"):
        assert callable(getattr(Compositor, name, None)), f"Compositor.{name} is gone"
    assert callable(getattr(CompositorUpdate, "render_segments", None))
    assert ChopsUpdate.__init__ is not object.__init__
