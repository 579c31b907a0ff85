"""What ``tokrace traces`` and its comparison (``--on``) share: the price argument, the progress threshold and
each file's object of the ``--json`` contract."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from rich.console import Console

from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.read import Found, read_file

if TYPE_CHECKING:
    from tokrace.providers.config.load import Config

PROGRESS_FROM: Final[int] = 10
"""Show a progress bar on stderr (when it is a terminal) from this many files on."""


def price_arg(text: str) -> Price:
    """``--original-price IN,OUT[,CACHED[,CACHE_WRITE]]``: USD per million tokens."""
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {PRICE_FORM} in USD per million tokens, got {text!r}") from None
    if len(values) not in (2, 3, 4) or any(v < 0 or v != v or v == float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"expected {PRICE_FORM} in USD per million tokens, got {text!r}")
    return Price(input=values[0], output=values[1], cached_input=values[2] if len(values) >= 3 else None,
                 cache_write=values[3] if len(values) == 4 else None)


PRICE_FORM = "INPUT,OUTPUT[,CACHED[,CACHE_WRITE]]"


def model_prices(config: Config) -> tuple[dict[str, Price], dict[str, str]]:
    """The price a trace's model call gets without ``--original-price``: the first tier of the config (or of the
    built-in demo) with the call's model and a price; and, per model, which tier that is in words."""
    prices: dict[str, Price] = {}
    sources: dict[str, str] = {}
    where = "a built-in demo tier" if config.source is None else f"a tier of {config.source.name}"
    for tier in config.tiers:
        if tier.model and tier.price is not None and tier.model not in prices:
            prices[tier.model] = tier.price
            sources[tier.model] = f"{tier.name}'s, {where} with the same model"
    return prices, sources


def file_json(found: Found) -> dict[str, Any]:
    """One file's object of the ``--json`` contract: its format, its traces, what was skipped, any problem."""
    return {"file": str(found.path), "format": found.format, "traces": len(found.traces),
            "skipped": sum(t.skipped for t in found.traces), "problem": found.problem}


def read_each(paths: Sequence[Path], trace_format: str | None, err: Console, doing: str) -> Iterator[Found]:
    """Each file read in turn (one at a time: a folder never sits in memory), with a progress bar saying ``doing``
    on ``err`` from :data:`PROGRESS_FROM` files on, when it is a terminal."""
    progress = None
    if len(paths) >= PROGRESS_FROM and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(TextColumn(doing), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=err, transient=True)
        progress.start()
    task = progress.add_task(doing, total=len(paths)) if progress is not None else None
    try:
        for path in paths:
            yield read_file(path, trace_format)
            if progress is not None and task is not None:
                progress.advance(task)
    finally:
        if progress is not None:
            progress.stop()
