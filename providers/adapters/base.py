"""What every provider is: a tier's settings in, an async stream of events out.

Adapters (synthetic, replay, and the HTTP ones) subclass :class:`Provider`; the race prepares them all before
the start, then asks each for the events of one turn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator

from ..model.events import Event
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..timing.clock import Clock


class Provider(ABC):
    """Turns a request into an async stream of events, stamped on the lane's clock.

    Subclasses set ``name`` (the config's ``provider`` value). ``prepare`` does anything slow (clients,
    connections, files) before the race starts, so lanes start on equal footing. ``stream`` must yield a
    ``Request`` first and end with ``Done`` or ``Error``; an exception escaping it becomes an ``Error`` event.
    """

    name: str = ""
    plays_whole_lane: bool = False
    """True for providers that replay a lane's whole event history (turns, tools) rather than answer turns."""

    def __init__(self, tier: TierSpec) -> None:
        self.tier = tier

    async def prepare(self, warm: bool = False) -> None:  # noqa: B027 (an optional hook: most need none)
        """Get ready before the start (create clients; with ``warm``, open connections)."""

    async def ready(self) -> None:  # noqa: B027 (an optional hook: most need none)
        """Before each run after the first, outside its clock: get back what the first run had at its start (its
        connection returned to the pool, a socket made ready), so that every run measures the same thing."""

    @abstractmethod
    def stream(self, request: TurnRequest, clock: Clock) -> AsyncIterator[Event]:
        """The events of one turn."""

    async def aclose(self) -> None:  # noqa: B027 (an optional hook: most need none)
        """Release clients and files."""
