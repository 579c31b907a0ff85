"""``tokrace locate``: where tokrace keeps what it reads and writes (config, themes, recordings, settings), and
whether each is there; ``tokrace locate WHAT`` prints one path alone, for scripts."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

WHATS: Final[tuple[str, ...]] = ("config", "themes", "recordings", "settings")
"""What ``locate`` can point at."""


@dataclass(frozen=True, slots=True)
class Place:
    """One place tokrace uses: what it holds, where it is, and what a person should know about it."""

    what: str
    path: Path
    note: str = ""


def places(cwd: Path | None = None) -> list[Place]:
    """Every place, in the order a person would look: the config files in lookup order, then the folders."""
    from tokrace.providers.config.load import find_config, user_config_path
    from tokrace.providers.recording import recordings_dir
    from tokrace.themes.plain import user_themes_dir

    from .settings import settings_path

    in_use = find_config(None, cwd)
    out = []
    for path, where in (((cwd or Path.cwd()) / "tokrace.toml", "looked for first, in this folder"),
                        (user_config_path(), "then in the user config dir")):
        note = "in use" if path == in_use else where
        out.append(Place("config", path.absolute(), note))
    themes = user_themes_dir()
    out.append(Place("themes", themes, _count(themes, "*.toml", "theme file")))
    recordings = recordings_dir()
    out.append(Place("recordings", recordings, _count(recordings, "*.jsonl", "recording")))
    out.append(Place("settings", settings_path(), "remembers the theme chosen last"))
    return out


def _count(folder: Path, pattern: str, noun: str) -> str:
    if not folder.is_dir():
        return ""
    n = sum(1 for _ in folder.glob(pattern))
    return f"{n} {noun}{'' if n == 1 else 's'}"


def path_of(what: str, cwd: Path | None = None) -> Path:
    """The one path ``tokrace locate WHAT`` prints: for ``config`` the file in use, else where to create one."""
    from tokrace.providers.config.load import find_config, user_config_path

    if what == "config":
        return (find_config(None, cwd) or user_config_path()).absolute()
    return next(place.path for place in places(cwd) if place.what == what)


def add_locate_parser(sub: Any) -> None:
    """The ``locate`` subcommand."""
    locate = sub.add_parser(
        "locate", help="where config, themes, recordings and settings live",
        description="Where tokrace looks for its config (./tokrace.toml, then the user config dir), user themes "
                    "and settings, and where it writes recordings; whether each exists. With WHAT, prints that "
                    "one path alone: the config file in use (or where to create one), or the folder or file.")
    locate.add_argument("what", nargs="?", choices=WHATS, metavar="WHAT",
                        help=f"print only this path: {', '.join(WHATS)}")


def cmd_locate(args: argparse.Namespace) -> int:
    if args.what is not None:
        print(path_of(args.what))
        return 0
    found = places()
    rows = [(p.what, str(p.path), "exists" if p.path.exists() else "missing", p.note) for p in found]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[3]]).rstrip())
    if not any(p.note == "in use" for p in found):
        print("no config file: tokrace races the built-in offline demo tiers")
    return 0
