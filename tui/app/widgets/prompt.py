"""The prompt bar: an input whose text, when it is longer than the bar and the bar is not being edited, ends in
an ellipsis, so a cut prompt never passes for the whole one; and whose secrets, when it is not being edited, are
masked as the recording masks them (docs/faults.md#what-is-masked)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Input

from tokrace.providers.model.masking import redact


class PromptInput(Input):
    """An :class:`Input` that shows "…" where its unfocused text is cut, and its unfocused text's secrets masked."""

    secrets: Sequence[str] = ()
    """The tiers' secret values (a key, a header value), masked like anything shaped like a key."""

    @property
    def _value(self) -> Text:
        text = super()._value
        if not self.has_focus:
            shown = redact(text.plain, self.secrets)
            if shown != text.plain:
                text = Text(shown, style=text.style)
        width = self.scrollable_content_region.width
        if self.has_focus or width < 2 or text.cell_len <= width:
            return text
        cut = text.copy()
        cut.truncate(width - 1, overflow="crop")
        cut.append("…")
        return cut
