"""A Static whose content changes at frame rate (a lane's figures, the line under the timeline)."""

from __future__ import annotations

from typing import Self

from textual.geometry import Region
from textual.widgets import Static

from ..render import compositor


class FrameStatic(Static):
    """A :class:`Static` repainted without messages (:func:`tokrace.tui.app.render.compositor.repaint`) when its
    content changes and
    its size does not (``update(..., layout=False)``): it is drawn in the frame's screen update, with the frame's
    other repaints, not in an update of its own a moment later."""

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False,
                ) -> Self:
        if repaint and not (layout or recompose):
            compositor.repaint(self, *regions)
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
