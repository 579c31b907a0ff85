"""What the app remembers between runs (the chosen theme), kept in ``settings.json`` in the user config dir.

The config file is the user's to write; this file is the app's. JSON because the standard library cannot write
TOML. A missing or unreadable file means nothing is remembered yet; it is replaced whole on every change.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Final

from tokrace.providers.model.errors import TokraceError

SETTINGS_NAME: Final[str] = "settings.json"
"""The settings file's name inside the user config dir."""


class SettingsError(TokraceError):
    """The settings could not be saved."""


def settings_path() -> Path:
    """``settings.json`` in tokrace's config dir (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("tokrace", appauthor=False)) / SETTINGS_NAME


class Settings:
    """The remembered settings, read once; every change is written at once."""

    def __init__(self, path: Path | None = None) -> None:
        self.path: Path = settings_path() if path is None else path
        """Where the settings live."""
        self._data: dict[str, Any] = self._read()

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def theme(self) -> str | None:
        """The theme chosen last, if any."""
        value = self._data.get("theme")
        return value if isinstance(value, str) else None

    def set_theme(self, name: str) -> None:
        """Remember ``name`` as the chosen theme."""
        if self.theme != name:
            self._data["theme"] = name
            self._write()

    def _write(self) -> None:
        # Write beside the file and rename over it, so a crash never leaves half a settings file.
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".settings-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(self._data, out, indent=2, sort_keys=True)
                    out.write("\n")
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise SettingsError(f"{self.path}: cannot save settings ({exc.strerror})") from None
