"""The figures of a run without its wall-clock start: a replay (or a second run) starts at another moment, with
every other figure the same."""

from __future__ import annotations

from typing import Any


def without_started_at(obj: Any) -> Any:
    """``obj`` (a ``--json`` object, or part of one) with every ``started_at`` key left out, at any depth."""
    if isinstance(obj, dict):
        return {k: without_started_at(v) for k, v in obj.items() if k != "started_at"}
    if isinstance(obj, list):
        return [without_started_at(v) for v in obj]
    return obj
