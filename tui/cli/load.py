"""``tokrace bench --concurrency``: continuous load on the tiers, a table (or JSON, CSV, Markdown, HTML) of the
aggregate rate and the percentiles per tier and level, a progress line on a terminal's stderr."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from collections.abc import Callable
from typing import Final

from rich.console import Console
from rich.markup import escape

from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import Listener
from tokrace.providers.runs.load import LoadPlan, LoadResult, RequestRow, run_load

from . import tables
from .parser import UsageError
from .rich_tables import rich_table
from .signals import EXIT_TERMINATED, Terminated, insist
from .tables import print_table

LOAD_REFUSES: Final[dict[str, str]] = {
    "scenario": "--scenario (an agent loop per stream is not a load of requests)",
    "voice": "--voice", "wpm": "--wpm", "tts_delay": "--tts-delay", "speak": "--speak",
    "record": "--record (a load is not recorded: its requests overlap; --json keeps every request's row)",
}
"""Options a load cannot honour, each refused by name rather than ignored."""


def check_load_args(args: argparse.Namespace) -> LoadPlan | None:
    """The load asked for, or ``None`` for a race; a load option without ``--concurrency``, or an option a load
    cannot honour, is a one-line usage error."""
    concurrency = getattr(args, "concurrency", None)
    if concurrency is None:
        for key, flag in (("requests", "--requests"), ("duration", "--duration")):
            if getattr(args, key, None) is not None:
                raise UsageError(f"{flag} applies to a load: add --concurrency N")
        return None
    for key, flag in LOAD_REFUSES.items():
        if getattr(args, key, None):
            raise UsageError(f"--concurrency does not take {flag}")
    if getattr(args, "runs", 1) != 1:
        raise UsageError("--concurrency does not take --runs: give --requests M (or --duration S) instead")
    return LoadPlan(concurrency, getattr(args, "requests", None), getattr(args, "duration", None))


class LoadProgress:
    """A transient progress line on a terminal's stderr: the level, the requests done, the time so far."""

    def __init__(self, console: Console, result_tiers: int) -> None:
        from rich.progress import Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("[bold]load[/]"), TextColumn("{task.description}"),
                                  TimeElapsedColumn(), console=console, transient=True)
        self._task = self._progress.add_task("", total=None)
        self._tiers = result_tiers
        self._level = 0
        self._done = 0
        self._failed = 0

    def start(self) -> None:
        self._progress.start()

    def stop(self) -> None:
        self._progress.stop()

    def level(self, n: int) -> None:
        self._level, self._done, self._failed = n, 0, 0
        self._describe()

    def request_started(self, tier: int, stream: int, origin: float) -> Listener | None:
        return None

    def request_ended(self, tier: int, row: RequestRow) -> None:
        self._done += 1
        self._failed += not row.ok
        if self._done % 8 == 0 or not row.ok:
            self._describe()

    def _describe(self) -> None:
        failed = f", {self._failed} failed" if self._failed else ""
        self._progress.update(self._task, description=f"{self._level} streams × {self._tiers} tiers: "
                                                      f"{self._done} requests done{failed}")


def run_load_headless(tiers: list[TierSpec], request: TurnRequest, plan: LoadPlan, *, fast_forward: bool,
                      warm: bool, json_target: str | None, exports: dict[str, str], prompt: str,
                      stall_threshold_s: float) -> int:
    """Run the load, print its table, write what was asked; 0 when every request succeeded, else 1."""
    from .export_files import check_exports

    check_exports(exports, json_target)
    if json_target not in (None, "-"):
        from .export_files import check_writable

        check_writable(json_target, "JSON")
    err = tables.console(stderr=True)
    progress = LoadProgress(err, len(tiers)) if err.is_terminal else None
    finished: list[LoadResult] = []
    terminated: list[int] = []

    async def session() -> None:
        main = asyncio.current_task()
        assert main is not None

        def terminate() -> None:
            terminated.append(signal.SIGTERM)
            main.cancel()

        forget: Callable[[], None] | None = None
        with contextlib.suppress(ValueError):
            forget = insist(signal.SIGTERM, EXIT_TERMINATED, terminate)
        try:
            finished.append(await run_load(tiers, request, plan, fast_forward=fast_forward, warm=warm,
                                           watch=progress, on_level=progress.level if progress else None,
                                           stall_threshold_s=stall_threshold_s))
        finally:
            if forget is not None:
                forget()

    if progress is not None:
        progress.start()
    interrupted = False
    try:
        asyncio.run(session())
    except KeyboardInterrupt:  # the load stopped and returned what it had: shown below, then the exit of Ctrl-C
        interrupted = True
    except asyncio.CancelledError:
        if not terminated:
            raise
    finally:
        if progress is not None:
            progress.stop()
    if not finished:  # stopped before the load began
        if terminated:
            raise Terminated()
        raise KeyboardInterrupt
    result = finished[0]
    # the load returns what it has when stopped, so asyncio.run sees no interrupt: a stop that was no SIGTERM is
    # asyncio.run's own SIGINT handler's (Ctrl-C)
    interrupted = interrupted or (result.stopped and not terminated)
    for warning in result.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if json_target != "-" and "-" not in exports.values():
        from tokrace.providers.export.load_export import load_table

        print_table(tables.console(), rich_table(load_table(result), status=True))
    write_load(result, json_target, exports, prompt)
    if terminated:
        raise Terminated()
    if interrupted:
        raise KeyboardInterrupt
    return 0 if result.all_ok else 1


def write_load(result: LoadResult, json_target: str | None, exports: dict[str, str], prompt: str) -> None:
    """Write the JSON and each export asked for, every key the tiers use masked as in every export."""
    from tokrace.providers.export import load_export
    from tokrace.providers.model.masking import redact
    from tokrace.providers.recording import secret_values
    from tokrace.providers.runs.load import load_report

    from .export_files import html_colours, write_output

    secrets = secret_values(result.tiers)
    if json_target is not None:
        text = json.dumps(load_report(result), indent=2, ensure_ascii=False, allow_nan=False)
        tables.write_text(redact(text, secrets) + "\n", json_target, "the JSON")
    for fmt, target in exports.items():
        if fmt == "csv":
            out = load_export.to_csv(result)
        elif fmt == "markdown":
            out = load_export.to_markdown(result, prompt)
        else:
            out = load_export.to_html(result, prompt, html_colours(None))
        write_output(redact(out, secrets), target, fmt)
