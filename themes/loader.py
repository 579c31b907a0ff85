"""Themes as data: validate TOML theme files and turn them into Textual themes carrying tokrace's own colours.

Built-in themes live in ``themes/builtin/*.toml``; users add theirs in the ``themes`` folder of the config
dir. A theme file holds Textual's ``Theme`` fields (only ``name`` and ``primary`` are required) and, under
``[variables]``, tokrace's own variables (:data:`APP_VARIABLES`: its colours, and the thickness of the
timeline's rows) and any of Textual's own variables. Every problem in every user file is collected as a
:class:`ThemeProblem` so the app can report them together and still start.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

from textual.color import Color, ColorParseError
from textual.design import ColorSystem
from textual.theme import Theme

from .plain import BUILTIN_DIR as BUILTIN_DIR  # their home is themes.plain (no Textual), re-exported here
from .plain import user_themes_dir as user_themes_dir

LANE_VARIABLES: Final[tuple[str, ...]] = tuple(f"lane-{i}" for i in range(6))
"""One colour per lane, in lane order (the race has at most six lanes)."""

SEGMENT_VARIABLES: Final[tuple[str, ...]] = tuple(
    f"seg-{kind}" for kind in ("connect", "wait", "think", "model", "tool", "human", "retry", "stall"))
"""One colour per timeline segment kind (``tokrace.providers.model.events.SEGMENT_KINDS``)."""

GAUGE_VARIABLES: Final[tuple[str, ...]] = ("gauge-low", "gauge-mid", "gauge-high")
"""The fill of a tok/s gauge in the low, middle and high third of its range."""

COLOUR_VARIABLES: Final[tuple[str, ...]] = LANE_VARIABLES + SEGMENT_VARIABLES + GAUGE_VARIABLES
"""Every colour tokrace itself draws with."""

ROW_HEIGHT_VARIABLE: Final[str] = "timeline-row-height"
"""How many terminal rows tall the timeline draws each lane's segments (a whole number; see :data:`ROW_HEIGHTS`)."""

ROW_HEIGHTS: Final[range] = range(1, 4)
"""The allowed values of :data:`ROW_HEIGHT_VARIABLE`: 1 (the default) to 3."""

NUMBER_VARIABLES: Final[dict[str, range]] = {ROW_HEIGHT_VARIABLE: ROW_HEIGHTS}
"""tokrace's variables that hold a whole number, with their allowed values. A theme stores them as strings (Textual's
``Theme.variables`` holds strings; as CSS variables they are plain numbers, which no stylesheet rule reads)."""

APP_VARIABLES: Final[tuple[str, ...]] = COLOUR_VARIABLES + tuple(NUMBER_VARIABLES)
"""Every variable tokrace itself reads; each theme defines all of them (derived when a file omits some)."""

COLOUR_KEYS: Final[tuple[str, ...]] = ("primary", "secondary", "accent", "foreground", "background",
                                       "surface", "panel", "boost", "warning", "error", "success")
"""Textual ``Theme`` fields that hold a colour."""

NUMBER_KEYS: Final[dict[str, tuple[float, float]]] = {"luminosity_spread": (0.0, 1.0),
                                                       "text_alpha": (0.0, 1.0)}
"""Textual ``Theme`` fields that hold a number, with their allowed range."""

TOP_KEYS: Final[tuple[str, ...]] = ("name", "dark", *COLOUR_KEYS, *NUMBER_KEYS, "variables")
"""Every key a theme file may have at its top level."""

DEFAULT_THEME: Final[str] = "tokrace-dark"
"""The theme used when nothing else is chosen."""

BASE_THEMES: Final[dict[bool, str]] = {True: "tokrace-dark", False: "tokrace-light"}
"""The built-in whose colours fill in the app variables a dark (``True``) or light theme leaves out."""

_NAME: Final[re.Pattern[str]] = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CSS_KEYWORDS: Final[frozenset[str]] = frozenset({"transparent", "initial", "auto"})


class ThemeError(Exception):
    """A theme file that cannot be used; the message says what is wrong and where, in one line."""


@dataclass(frozen=True, slots=True)
class ThemeProblem:
    """A user theme file that failed to load, with why."""

    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass(frozen=True, slots=True)
class LoadedTheme:
    """A usable theme and where it came from (``source`` is ``None`` for a built-in)."""

    theme: Theme
    source: Path | None = None

    @property
    def origin(self) -> str:
        """``built-in`` or the path of the user's file."""
        return "built-in" if self.source is None else str(self.source)


@dataclass(slots=True)
class ThemeCatalog:
    """Every theme available at start: built-ins first, user themes after; broken user files on the side."""

    themes: dict[str, LoadedTheme] = field(default_factory=dict)
    problems: list[ThemeProblem] = field(default_factory=list)

    def report(self) -> str | None:
        """All broken files in one message (for one notification), or ``None`` when every file loaded."""
        if not self.problems:
            return None
        count = len(self.problems)
        lines = [f"{count} theme file{'s' if count > 1 else ''} could not be loaded:"]
        lines += [str(problem) for problem in self.problems]
        return "\n".join(lines)


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def _fail(text: str, key: str, problem: str) -> ThemeError:
    line = _line_of(text, key)
    return ThemeError(f"line {line}: {key}: {problem}" if line else f"{key}: {problem}")


def _colour(value: Any) -> Color:
    if not isinstance(value, str):
        raise ThemeError(f"expected a colour string like \"#4FA8FF\", got {value!r}")
    try:
        return Color.parse(value.strip())
    except ColorParseError as exc:
        raise ThemeError(str(exc).rstrip(".")) from None


def _css_colour_ok(value: str) -> bool:
    """Whether Textual accepts ``value`` for a colour variable: a colour or a keyword, maybe with a %."""
    words = value.split()
    if len(words) == 2 and re.fullmatch(r"\d+(\.\d+)?%", words[1]):
        words = words[:1]
    if len(words) != 1:
        return False
    if words[0] in _CSS_KEYWORDS:
        return True
    try:
        Color.parse(words[0])
    except ColorParseError:
        return False
    return True


@cache
def textual_variables() -> Mapping[str, str]:
    """Textual's own theme variables with their values for a plain theme, to check names and kinds against."""
    return ColorSystem(primary="#0178D4").generate()


def _variables(raw: Any, text: str, base: Mapping[str, str], errors: list[str]) -> dict[str, str]:
    """The app and Textual variables of ``[variables]`` over ``base``; each bad one adds to ``errors``."""
    if not isinstance(raw, dict):
        errors.append(str(_fail(text, "variables", "expected a table [variables]")))
        return {key: base[key] for key in APP_VARIABLES if key in base}
    textual = textual_variables()
    out = {key: base[key] for key in APP_VARIABLES if key in base}
    for key, value in raw.items():
        if key in COLOUR_VARIABLES:
            try:
                out[key] = _colour(value).hex
            except ThemeError as exc:
                errors.append(str(_fail(text, key, str(exc))))
        elif key in NUMBER_VARIABLES:
            allowed = NUMBER_VARIABLES[key]
            if isinstance(value, bool) or not isinstance(value, int) or value not in allowed:
                errors.append(str(_fail(text, key, f"expected a whole number from {allowed[0]} to {allowed[-1]}, "
                                                   f"got {value!r}")))
            else:
                out[key] = str(value)
        elif key in textual:
            if not isinstance(value, str):
                errors.append(str(_fail(text, key, f"expected a string, got {value!r}")))
            elif not key.endswith("style") and not _css_colour_ok(value):
                errors.append(str(_fail(text, key, f"expected a colour like '#4FA8FF' or '#4FA8FF 50%', "
                                                   f"got {value!r}")))
            else:
                out[key] = value
        else:
            close = difflib.get_close_matches(key, [*APP_VARIABLES, *textual], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            errors.append(str(_fail(text, key, f"unknown variable{hint}")))
    return out


def timeline_row_height(variables: Mapping[str, str]) -> int:
    """The timeline's row height a theme's variables ask for (1 when they do not say, or say nonsense)."""
    value = variables.get(ROW_HEIGHT_VARIABLE, "")
    return int(value) if value.isdecimal() and int(value) in ROW_HEIGHTS else ROW_HEIGHTS[0]


def parse_theme(text: str, base: Mapping[str, str] | None = None) -> Theme:
    """Validate a theme file's text and build the Textual theme.

    ``base`` supplies the app variables the file leaves out; by default they come from the built-in of the
    same darkness (:data:`BASE_THEMES`). Raises :class:`ThemeError` with a one-line message naming every problem
    of the file (joined by " · "), not only the first.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"not valid TOML: {exc}") from None
    errors: list[str] = []  # every problem of the file, so one round of fixes is enough
    for key in data:
        if key not in TOP_KEYS:
            close = difflib.get_close_matches(key, TOP_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(TOP_KEYS)}"
            errors.append(str(_fail(text, key, f"unknown key; {hint}")))
    name = data.get("name")
    if name is None:
        errors.append("name: missing; every theme needs a name")
    elif not isinstance(name, str) or not _NAME.fullmatch(name):
        errors.append(str(_fail(text, "name", f"expected letters, digits, '-', '_' or '.', without spaces, "
                                              f"got {name!r}")))
    if "primary" not in data:
        errors.append("primary: missing; every theme needs a primary colour")
    colours: dict[str, str] = {}
    for key in COLOUR_KEYS:
        if key in data:
            try:
                colours[key] = _colour(data[key]).hex
            except ThemeError as exc:
                errors.append(str(_fail(text, key, str(exc))))
    numbers: dict[str, float] = {}
    for key, (low, high) in NUMBER_KEYS.items():
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                errors.append(str(_fail(text, key, f"expected a number from {low:g} to {high:g}, got {value!r}")))
            else:
                numbers[key] = float(value)
    dark = data.get("dark")
    if dark is None:
        # A theme that only sets a background is dark when that background is.
        dark = Color.parse(colours["background"]).brightness < 0.5 if "background" in colours else True
    elif not isinstance(dark, bool):
        errors.append(str(_fail(text, "dark", f"expected true or false, got {dark!r}")))
        dark = True
    if base is None:
        base = builtin_variables(BASE_THEMES[dark])
    variables = _variables(data.get("variables", {}), text, base, errors)
    if errors:
        raise ThemeError(" · ".join(errors))
    fields: dict[str, Any] = {**colours, **numbers}
    return Theme(name=str(name), dark=dark, variables=variables, **fields)


def load_theme_file(path: Path, base: Mapping[str, str] | None = None) -> Theme:
    """Read and parse one theme file; any problem is a :class:`ThemeError` (without the path)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ThemeError("not UTF-8 text") from None
    except OSError as exc:
        raise ThemeError(f"cannot read the file ({exc.strerror})") from None
    return parse_theme(text, base)


@cache
def _builtin_files() -> dict[str, Path]:
    return {path.stem: path for path in sorted(BUILTIN_DIR.glob("*.toml"))}


@cache
def builtin_variables(name: str) -> Mapping[str, str]:
    """The complete ``[variables]`` of a built-in that defines every app variable itself (a base theme)."""
    theme = load_theme_file(_builtin_files()[name], base={})
    missing = [key for key in APP_VARIABLES if key not in theme.variables]
    if missing:
        raise ThemeError(f"built-in theme {name!r} must define {', '.join(missing)}")
    return theme.variables


def builtin_themes() -> dict[str, Theme]:
    """Every built-in theme by name, the default first."""
    themes = {}
    for stem, path in _builtin_files().items():
        try:
            theme = load_theme_file(path)
        except ThemeError as exc:
            raise ThemeError(f"built-in theme {path.name}: {exc}") from None
        if theme.name != stem:
            raise ThemeError(f"built-in theme {path.name} is named {theme.name!r}; name it after its file")
        themes[theme.name] = theme
    return dict(sorted(themes.items(), key=lambda item: (item[0] != DEFAULT_THEME, item[0])))


def load_themes(user_dir: Path | None = None) -> ThemeCatalog:
    """Built-in themes, then every ``*.toml`` in ``user_dir`` (default: :func:`user_themes_dir`).

    A user theme named like a built-in replaces it; a broken file becomes a :class:`ThemeProblem` and the
    rest load on.
    """
    catalog = ThemeCatalog({name: LoadedTheme(theme) for name, theme in builtin_themes().items()})
    folder = user_themes_dir() if user_dir is None else user_dir
    if not folder.exists():
        return catalog
    try:
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".toml" and not p.name.startswith("."))
    except OSError as exc:
        catalog.problems.append(ThemeProblem(folder, f"cannot list the themes folder ({exc.strerror})"))
        return catalog
    from_files: dict[str, Path] = {}
    for path in paths:
        try:
            theme = load_theme_file(path)
        except ThemeError as exc:
            catalog.problems.append(ThemeProblem(path, str(exc)))
            continue
        if theme.name in from_files:
            catalog.problems.append(ThemeProblem(
                path, f"name: {theme.name!r} is already the name of {from_files[theme.name]}"))
            continue
        from_files[theme.name] = path
        catalog.themes[theme.name] = LoadedTheme(theme, path)
    return catalog
