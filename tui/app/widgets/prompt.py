"""The prompt bar: an input whose text, when it is longer than the bar and the bar is not being edited, ends in
an ellipsis, so a cut prompt never passes for the whole one."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input


class PromptInput(Input):
    """An :class:`Input` that shows "…" where its unfocused text is cut."""

    @property
    def _value(self) -> Text:
        text = super()._value
        width = self.scrollable_content_region.width
        if self.has_focus or width < 2 or text.cell_len <= width:
            return text
        cut = text.copy()
        cut.truncate(width - 1, overflow="crop")
        cut.append("…")
        return cut
