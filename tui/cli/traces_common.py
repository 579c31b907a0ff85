"""What ``tokrace traces`` and its comparison (``--on``) share: the price and jobs arguments, reading files in
worker processes with a progress bar, and each file's object of the ``--json`` contract."""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from rich.console import Console

from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.read import Found, read_file

if TYPE_CHECKING:
    from tokrace.providers.config.load import Config

PROGRESS_FROM: Final[int] = 10
"""Show a progress bar on stderr (when it is a terminal) from this many files on."""
MAX_JOBS: Final[int] = 256
"""The most worker processes ``--jobs`` takes."""
AHEAD_PER_JOB: Final[int] = 4
"""Batches of files handed to the workers and not yet read, per job: enough to keep them busy while a big file is
read, few enough that memory stays bounded."""
BATCH_FILES: Final[int] = 16
"""The most files a worker takes at a time (see :func:`batches`)."""
BATCH_BYTES: Final[int] = 8 << 20
"""The most bytes of files a worker takes at a time (see :func:`batches`)."""

TAIL_SHARE: Final[float] = 1 / 32
"""A file at least this share of a job's even share of the bytes is started before the others (largest first): a
big file started last would leave the other workers idle while it is read."""

T = TypeVar("T")


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


def cores() -> int:
    """The cores this process may run on: ``--jobs``'s default."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def jobs_arg(text: str) -> int:
    """``--jobs N``: a whole number of worker processes, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, got {text!r}") from None
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_JOBS} processes, got {value}")
    return value


def add_jobs_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
                   help="read and analyse files in N processes at once (default: the number of cores, "
                        f"{cores()} here); the output is the same for any N")


_digest: Callable[[Found], Any] | None = None
"""What each worker does with a file it read (set before the workers are forked: see :func:`read_each`)."""
_format: str | None = None


def _work(paths: Sequence[Path]) -> list[Any]:
    """A worker's batch: each file's digest, or the failure that stopped it (raised in that file's turn)."""
    assert _digest is not None
    out: list[Any] = []
    for path in paths:
        try:
            out.append(_digest(read_file(path, _format)))
        except Exception as exc:  # raised by the parent in this file's turn, as one job would
            out.append(_Failed(exc))
    return out


class _Failed:
    """A file's digest that raised, carried back to be raised in its turn."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def read_each(paths: Sequence[Path], trace_format: str | None, err: Console, doing: str,
              digest: Callable[[Found], T], jobs: int | None = 1) -> Iterator[T]:
    """``digest`` of each file read, in the order of ``paths`` whatever ``jobs`` is (``None``: one per core),
    with a progress bar saying ``doing`` on ``err`` from :data:`PROGRESS_FROM` files on, when it is a terminal.

    ``digest`` runs where the file was read: with several jobs, in forked worker processes, so it must return
    something small to send back (a trace's figures, its steps let go). At most a few files per job are in
    flight, so a folder never sits in memory either way. Where processes cannot be forked, one job reads."""
    progress = None
    if len(paths) >= PROGRESS_FROM and err.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        progress = Progress(TextColumn(doing), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=err, transient=True)
        progress.start()
    task = progress.add_task(doing, total=len(paths)) if progress is not None else None
    jobs = min(cores() if jobs is None else jobs, len(paths))
    try:
        results = (_in_workers(paths, trace_format, digest, jobs)
                   if jobs > 1 and "fork" in multiprocessing.get_all_start_methods()
                   else (digest(read_file(path, trace_format)) for path in paths))
        for result in results:
            yield result
            if progress is not None and task is not None:
                progress.advance(task)
    finally:
        if progress is not None:
            progress.stop()


def start_order(sizes: Sequence[int], jobs: int) -> list[int]:
    """The order to hand files of ``sizes`` bytes to ``jobs`` workers in: those big enough to hold the others up at
    the end (each at least :data:`TAIL_SHARE` of a job's even share of the bytes) first, largest first, then the
    rest in their own order, so that the last files to start are small and the workers end together."""
    even = sum(sizes) / max(jobs, 1)
    big = sorted((i for i, size in enumerate(sizes) if size and size >= even * TAIL_SHARE),
                 key=lambda i: (-sizes[i], i))
    first = set(big)
    return big + [i for i in range(len(sizes)) if i not in first]


def batches(order: Sequence[int], sizes: Sequence[int], jobs: int) -> list[list[int]]:
    """``order`` (:func:`start_order`) cut into what a worker takes at a time: a big file alone, the rest in runs of
    up to :data:`BATCH_FILES` files and :data:`BATCH_BYTES` bytes that shrink as the end nears (a run is at most an
    eighth of a job's share of the files left), so that each file does not cost the parent a hand-over of its own
    and the last runs are single files that end together."""
    even = sum(sizes) / max(jobs, 1)
    out: list[list[int]] = []
    at = 0
    while at < len(order):
        first = order[at]
        if sizes[first] and sizes[first] >= even * TAIL_SHARE:
            out.append([first])
            at += 1
            continue
        room = max(1, min(BATCH_FILES, (len(order) - at) // (jobs * 8)))
        run, size = [first], sizes[first]
        while len(run) < room and at + len(run) < len(order):
            following = order[at + len(run)]
            if size + sizes[following] > BATCH_BYTES or sizes[following] >= even * TAIL_SHARE:
                break
            run.append(following)
            size += sizes[following]
        out.append(run)
        at += len(run)
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read_file says what is wrong with it, in its turn


def _in_workers(paths: Sequence[Path], trace_format: str | None, digest: Callable[[Found], T],
                jobs: int) -> Iterator[T]:
    """:func:`read_each`'s results from ``jobs`` forked processes, in order: a few batches per job are being read
    at any time, started in :func:`start_order` and cut by :func:`batches`; a result that came before its turn
    (small: a digest) waits for it."""
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    global _digest, _format
    _digest, _format = digest, trace_format
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"))
    try:
        sizes = [_size(path) for path in paths]
        todo = iter(batches(start_order(sizes, jobs), sizes, jobs))
        running: dict[Future[list[Any]], list[int]] = {}
        finished: dict[int, Any] = {}
        turn = 0
        while turn < len(paths):
            if turn in finished:
                result = finished.pop(turn)
                if isinstance(result, _Failed):
                    raise result.exc
                yield result
                turn += 1
                continue
            for batch in itertools.islice(todo, max(jobs * AHEAD_PER_JOB - len(running), 0)):
                running[pool.submit(_work, [paths[i] for i in batch])] = batch
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                finished.update(zip(running.pop(future), future.result(), strict=True))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _digest = _format = None
