"""Where recordings live: the default folder, a new recording's name, and the listing ``tokrace recordings`` shows."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model.printable import one_line
from .format import RecordingError
from .reader import last_event_time, race_state, read_header


def recordings_dir() -> Path:
    """Where recordings go unless told otherwise: the platformdirs user data dir, ``tokrace/recordings``."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("tokrace", appauthor=False)) / "recordings"


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")


def default_path(prompt: str, now: dt.datetime | None = None, tiers: Sequence[str] = ()) -> Path:
    """A new recording's file name: when, a slug of the prompt (or the scenario's name), and the tiers raced, so
    two races of one prompt on other tiers are told apart in ``tokrace recordings``."""
    now = now or dt.datetime.now()
    slug = _slug(prompt, 40) or "race"
    raced = _slug("-".join(tiers), 48)
    return recordings_dir() / f"{now:%Y%m%d-%H%M%S}-{slug}{'-' + raced if raced else ''}.jsonl"


@dataclass(frozen=True, slots=True)
class RecordingInfo:
    """One line of ``tokrace recordings``."""

    path: Path
    created: str
    prompt: str
    tiers: list[str]
    duration: float | None
    problem: str | None = None
    state: str = ""
    """``"stopped"`` or ``"partial"`` when the race did not run to its end (:func:`.reader.race_state`)."""


def list_recordings(directory: Path | None = None) -> list[RecordingInfo]:
    """Every recording in a folder, newest first, from each file's header and last line only; unreadable
    files are listed with their problem."""
    directory = directory or recordings_dir()
    if not directory.is_dir():
        return []
    out = []
    files = [p for p in directory.glob("*.jsonl") if p.is_file()]  # a pipe named .jsonl would never end
    for path in sorted(files, key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            header = read_header(path)
            duration = last_event_time(path)
            state = race_state(path, header)
        except RecordingError as exc:
            out.append(RecordingInfo(path, "", "", [], None, str(exc)))
            continue
        out.append(RecordingInfo(path, one_line(str(header.get("created", ""))),
                                 one_line(str(header.get("prompt") or "")),
                                 [one_line(str(t.get("name"))) for t in header.get("tiers", [])], duration,
                                 state=state))
    return out


def shown_path(path: Path) -> str:
    """A recording's path as a screen shows it, never the absolute path (a screen may be in front of an
    audience): its name in the recordings folder, else relative to the current folder, else under ``~``."""
    if path.parent == recordings_dir():
        return f"{path.name} (in the recordings folder: tokrace recordings)"
    for base, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            return prefix + str(path.relative_to(base))
        except ValueError:
            continue
    return path.name
