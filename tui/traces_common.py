"""What ``tokrace traces`` and its comparison (``--on``) share: the price argument, the progress threshold and
each file's object of the ``--json`` contract."""

from __future__ import annotations

import argparse
from typing import Any, Final

from providers.base import Price
from providers.traces.read import Found

PROGRESS_FROM: Final[int] = 10
"""Show a progress bar on stderr (when it is a terminal) from this many files on."""


def price_arg(text: str) -> Price:
    """``--original-price IN,OUT[,CACHED]``: USD per million tokens."""
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected INPUT,OUTPUT[,CACHED] in USD per million tokens, got {text!r}"
                                         ) from None
    if len(values) not in (2, 3) or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected INPUT,OUTPUT[,CACHED] in USD per million tokens, got {text!r}")
    return Price(input=values[0], output=values[1], cached_input=values[2] if len(values) == 3 else None)


def file_json(found: Found) -> dict[str, Any]:
    """One file's object of the ``--json`` contract: its format, its traces, what was skipped, any problem."""
    return {"file": str(found.path), "format": found.format, "traces": len(found.traces),
            "skipped": sum(t.skipped for t in found.traces), "problem": found.problem}
