"""Themes inside the app: register tokrace's themes, pick the one to start with, remember the user's choice.

The app offers exactly the themes ``tokrace themes`` lists (built-ins and the user's files), so every theme on
offer defines tokrace's own colours. A theme chosen while the app runs (the command palette's theme picker) is
remembered in the settings and used on the next start; ``--theme`` applies to one run only.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.theme import BUILTIN_THEMES, Theme

from tokrace.providers.model.errors import TokraceError
from tokrace.themes.loader import DEFAULT_THEME, ThemeCatalog, load_themes

from ..cli.settings import Settings, SettingsError


class UnknownThemeError(TokraceError):
    """``--theme`` names a theme that does not exist."""


def check_theme(name: str, catalog: ThemeCatalog) -> str:
    """``name`` when the catalog has it; else a one-line error listing the themes there are."""
    if name not in catalog.themes:
        raise UnknownThemeError(f"no theme named {name!r} (themes: {', '.join(catalog.themes)}; "
                                "see `tokrace themes`)")
    return name


class AppThemes:
    """The themes of one app run: which to start with, what to tell the user, where choices are remembered.

    In order, the start theme is ``requested`` (``--theme``), the theme chosen last, ``configured`` (the
    config's ``[defaults] theme``), then the default theme.
    """

    def __init__(self, catalog: ThemeCatalog | None = None, settings: Settings | None = None, *,
                 requested: str | None = None, configured: str | None = None) -> None:
        self.catalog: ThemeCatalog = load_themes() if catalog is None else catalog
        """Every theme on offer, and the user files that failed to load."""
        self.settings: Settings = Settings() if settings is None else settings
        """Where the chosen theme is remembered."""
        self.notes: list[str] = [] if (report := self.catalog.report()) is None else [report]
        """What to tell the user at start, in one notification."""
        self.start: str = self._start(requested, configured)
        """The theme the app opens with."""

    def _start(self, requested: str | None, configured: str | None) -> str:
        if requested is not None:
            return check_theme(requested, self.catalog)
        gone = []
        for name, where in ((self.settings.theme, "chosen last"), (configured, "set in the config")):
            if name is None:
                continue
            if name in self.catalog.themes:
                return name
            gone.append(f"the theme {name!r} {where} no longer exists")
        if gone:
            self.notes.append(f"{'; '.join(gone)}; using {DEFAULT_THEME}")
        return DEFAULT_THEME

    def install(self, app: App[Any]) -> None:
        """Before the app runs: register every theme, open with the start theme, withdraw Textual's own."""
        for loaded in self.catalog.themes.values():
            app.register_theme(loaded.theme)
        app.theme = self.start
        for name in BUILTIN_THEMES:
            if name not in self.catalog.themes:
                app.unregister_theme(name)

    def mount(self, app: App[Any]) -> None:
        """Once the app runs: report broken theme files, and remember every theme chosen from now on."""
        if self.notes:
            app.notify("\n".join(self.notes), title="Themes", severity="warning", timeout=12, markup=False)

        def remember(theme: Theme) -> None:
            try:
                self.settings.set_theme(theme.name)
            except SettingsError as exc:
                app.notify(str(exc), title="Theme not remembered", severity="warning", markup=False)

        app.theme_changed_signal.subscribe(app, remember)
