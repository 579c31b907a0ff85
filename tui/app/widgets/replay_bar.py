"""The replay's status line: playing or paused, speed, position in the recording."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class ReplayBar(Static):
    """Shows :meth:`ReplayControl.status`; updated a few times a second without layout."""

    DEFAULT_CSS = """
    ReplayBar { height: 1; padding: 0 1; background: $primary 20%; }
    """

    _shown = ""

    def show(self, status: str) -> None:
        if status != self._shown:
            self._shown = status
            self.update(Content(status), layout=False)  # literal: the file's name is not markup
