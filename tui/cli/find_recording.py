"""``tokrace replay NAME``: a path, or a recording's name (or the start of one) in the recordings folder."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tokrace.providers.model.errors import TokraceError

SHOWN: Final[int] = 8
"""How many candidates an error names before "and N more"."""


class RecordingNotFound(TokraceError):
    """No recording, or more than one, answers to the name."""


def _listed(names: list[str]) -> str:
    more = f", and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def find_recording(given: Path, folder: Path) -> Path:
    """``given`` when it is there (a file, or anything else the reader then refuses); else the recording in
    ``folder`` named ``given`` (with or without ``.jsonl``), else the only one whose name starts with it. None or
    several: one clear error naming the candidates."""
    if given.is_file() or (given.exists() and not given.is_dir()) or given.parent != Path("."):
        return given  # a path (the reader says what is wrong with it: a FIFO, a folder, or that it does not exist)
    name = given.name
    recordings = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True) \
        if folder.is_dir() else []
    for candidate in recordings:
        if candidate.name in (name, f"{name}.jsonl"):
            return candidate
    matches = [p for p in recordings if p.name.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise RecordingNotFound(f"{name!r} starts the names of {len(matches)} recordings in {folder}: "
                                f"{_listed([p.name for p in matches])}; give more of the name")
    if not recordings:
        raise RecordingNotFound(f"{name}: no such file, and no recordings in {folder} (see `tokrace recordings`)")
    raise RecordingNotFound(f"{name}: no such file, and no recording in {folder} is named so or starts so; "
                            f"newest: {_listed([p.name for p in recordings])}")
