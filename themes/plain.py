"""A theme's colours read straight from its TOML file, without Textual: for what leaves the program (the HTML
report draws with the theme's lane and segment colours, and must not pay for, or depend on, the app).

Only plain hex colours are taken (``#4FA8FF``, ``#FFF``); anything else in a file falls back to the colour of the
built-in the theme is based on, so what reaches an export is always a safe ``#RRGGBB``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Final

BUILTIN_DIR: Final[Path] = Path(__file__).with_name("builtin")
"""Where the built-in theme files live."""

BASE_COLOURS: Final[tuple[str, ...]] = ("primary", "foreground", "background", "surface", "panel")
"""The base colours of a theme an export uses, beside the app's own ``lane-N`` and ``seg-KIND``."""

_HEX: Final[re.Pattern[str]] = re.compile(r"#(?:[0-9A-Fa-f]{6}|[0-9A-Fa-f]{3})")


def user_themes_dir() -> Path:
    """The folder of user theme files: ``themes`` in tokrace's config dir (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("tokrace", appauthor=False)) / "themes"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return data if isinstance(data.get("name"), str) else None


def _hex(value: Any) -> str | None:
    if not isinstance(value, str) or not _HEX.fullmatch(value.strip()):
        return None
    text = value.strip().upper()
    return text if len(text) == 7 else "#" + "".join(ch * 2 for ch in text[1:])


def theme_files(user_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every readable theme file's data by theme name: built-ins, then the user's (which replace a built-in of the
    same name, as in the app). Files that cannot be read are left out (``tokrace themes`` says why)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        data = _read(path)
        if data is not None:
            out[data["name"]] = data
    folder = user_themes_dir() if user_dir is None else user_dir
    try:
        paths = sorted(p for p in folder.glob("*.toml") if not p.name.startswith("."))
    except OSError:
        paths = []
    for path in paths:
        data = _read(path)
        if data is not None:
            out[data["name"]] = data
    return out


def _is_dark(data: dict[str, Any]) -> bool:
    dark = data.get("dark")
    if isinstance(dark, bool):
        return dark
    background = _hex(data.get("background"))
    if background is None:
        return True
    r, g, b = (int(background[i:i + 2], 16) for i in (1, 3, 5))
    return (0.299 * r + 0.587 * g + 0.114 * b) / 255 < 0.5


def _own(data: dict[str, Any]) -> dict[str, str]:
    variables = data.get("variables")
    out = {key: colour for key in BASE_COLOURS if (colour := _hex(data.get(key))) is not None}
    if isinstance(variables, dict):
        out.update({key: colour for key, value in variables.items()
                    if isinstance(key, str) and key.startswith(("lane-", "seg-")) and (colour := _hex(value))})
    return out


def theme_colours(name: str, user_dir: Path | None = None) -> dict[str, str] | None:
    """The theme's base, lane and segment colours as ``#RRGGBB`` (what it leaves out from the built-in it is based
    on: ``tokrace-dark`` or ``tokrace-light``); ``None`` when no theme has that name."""
    files = theme_files(user_dir)
    data = files.get(name)
    if data is None:
        return None
    base_name = "tokrace-dark" if _is_dark(data) else "tokrace-light"
    base = _read(BUILTIN_DIR / f"{base_name}.toml") or {}
    return {**_own(base), **_own(data)}
