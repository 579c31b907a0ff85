"""``tokrace proxy``: the live recording proxy between an agent and its provider (docs/design.md §13)."""

from __future__ import annotations

from .relay import Observer, ProxyServer
from .routes import Routes, Upstream

__all__ = ["Observer", "ProxyServer", "Routes", "Upstream"]
