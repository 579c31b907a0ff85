"""The recording format's name and version (docs/design.md §7), and the error for a recording that cannot be read
or written."""

from __future__ import annotations

from typing import Final

from ..model.errors import TokraceError

FORMAT: Final[str] = "tokrace-recording"
"""The header's ``format``: what marks a file as a tokrace recording."""

VERSION: Final[int] = 1
"""The major format version this build writes and reads; a newer one is refused."""


class RecordingError(TokraceError):
    """A file is not a recording this version can read, or a recording could not be written."""
