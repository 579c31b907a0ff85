"""Where the races started from the screen are recorded: every race to a new file, never over an earlier one.

By default each race goes to a new file in the recordings folder, named as ``tokrace bench`` names its own
(:func:`tokrace.providers.recording.paths.default_path`: when, the prompt or the scenario, and the tiers).
With ``--record FILE`` the first race goes to FILE (replacing it, as ``bench --record FILE`` does) and each race
after it to the next free FILE-2, FILE-3, … (keeping the suffix: ``talk.jsonl``, ``talk-2.jsonl``); a file that
exists is never replaced except FILE itself. Replays are never recorded again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ..recording import default_path

FLUSH_EVERY_S: Final[float] = 0.05
"""How often, in race time, the screen's recorder writes what arrived since (see :class:`RaceRunner`): one write of
whole lines per tick instead of one per event, which at 20,000 tokens a second would cost the readers. On the real
clock it writes at the points of the lanes' coarse grid, 32 ms apart (``RaceRunner._flush_every``)."""


def free_path(path: Path, *, numbered: bool = False) -> Path:
    """``path`` when no file is there (unless ``numbered``), else the first free ``stem-2.suffix``,
    ``stem-3.suffix``, …"""
    if not numbered and not path.exists():
        return path
    n = 2
    while (candidate := path.with_name(f"{path.stem}-{n}{path.suffix}")).exists():
        n += 1
    return candidate


class RecordPlan:
    """Names the file of each race the screen starts."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        """``--record FILE``, or ``None`` for a new file per race in the recordings folder."""
        self.races = 0

    def next_path(self, slug: str, tiers: Sequence[str] = ()) -> Path:
        """The file for the next race; ``slug`` (the prompt, or the scenario's name) and the ``tiers`` raced name
        default files."""
        self.races += 1
        if self.path is None:
            return free_path(default_path(slug, tiers=tiers))
        return self.path if self.races == 1 else free_path(self.path, numbered=True)
