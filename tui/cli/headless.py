"""Headless output for ``tokrace bench`` and ``tokrace replay --headless``: a Rich table for people, JSON for
machines, a progress line on a terminal's stderr while racing."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from tokrace.providers.export import tables as cells
from tokrace.providers.loop.scenario import Scenario
from tokrace.providers.metrics.loop import WHAT_IF_FACTOR
from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.race import Listener
from tokrace.providers.recording import Recorder, RecordingError
from tokrace.providers.runs.session import SessionResult, report, run_session
from tokrace.providers.timing.clock import Clock
from tokrace.providers.voice.lens import CONVERSATION_GAP_S, VoiceSettings, conversation_verdict
from tokrace.providers.voice.speak import Speaker

from . import tables
from .loop_report import bottleneck_table, speedup_line
from .progress import BenchProgress
from .rich_tables import rich_table
from .signals import EXIT_TERMINATED, Terminated, insist
from .tables import print_table


def results_table(result: SessionResult, runs: int) -> Table:
    """One row per tier: p50 over its runs when there are several."""
    return rich_table(cells.results_table(result, runs), status=True)


def voice_table(result: SessionResult, settings: VoiceSettings, runs: int) -> Table:
    """The voice lens, a row per tier: when speech could start and whether the text ever ran dry under it."""
    title = (f"voice at {settings.wpm:g} wpm, TTS delay {settings.tts_delay_s * 1000:.0f} ms"
             + (f" — p50 of {runs} runs" if runs > 1 else ""))
    table = Table(title=title, title_justify="left")
    several = runs > 1 or any(len(v.turns) > 1 for lane in result.voice(settings) for v in lane)
    audio = "slowest 1st audio" if several else "1st audio"  # the figure the verdict judges, named for what it is
    for col, justify in (("tier", "left"), ("TTFS", "right"), (audio, "right"), ("stalls", "right"),
                         ("silent", "right"), ("margin", "right"), ("talk", "left")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for tier, lane in zip(result.tiers, result.voice(settings), strict=True):
        holds, _ = conversation_verdict(lane)
        stalls = cells.p50([float(v.stalls) for v in lane])
        table.add_row(escape(tier.name), cells.fmt(cells.p50([v.ttfs_s for v in lane]), " s", 3),
                      cells.fmt(cells.p50([v.first_audio_max_s for v in lane]), " s", 3),
                      "—" if stalls is None else f"{stalls:g}",
                      cells.fmt(cells.p50([v.stall_s for v in lane]), " s", 1),
                      cells.fmt(cells.p50([v.min_margin_s for v in lane]), " s", 1),
                      "[green]holds[/]" if holds else "[red]gaps[/]")
    return table


def verdict_line(result: SessionResult, settings: VoiceSettings) -> str:
    """Which tiers could hold a conversation without a gap, and why the others could not (Rich markup)."""
    holds: list[str] = []
    gaps: list[str] = []
    for tier, lane in zip(result.tiers, result.voice(settings), strict=True):
        ok, why = conversation_verdict(lane)
        (holds if ok else gaps).append(escape(tier.name) if ok else f"{escape(tier.name)} ({why})")
    rule = f"first audio within {CONVERSATION_GAP_S:g} s and never silent mid-answer"
    if not holds:
        return f"no tier could hold a conversation without a gap ({rule}): {', '.join(gaps)}"
    line = f"could hold a conversation without a gap ({rule}): {', '.join(holds)}"
    return line + (f"; not: {', '.join(gaps)}" if gaps else "")


def write_json(result: SessionResult, target: str, voice: VoiceSettings | None = None) -> None:
    """Write the JSON contract to a file, or stdout for ``-``; with ``voice``, the voice lens on every run."""
    text = json.dumps(report(result, voice), indent=2, ensure_ascii=False, allow_nan=False)
    tables.write_text(text + "\n", target, "the JSON")


def run_headless(tiers: list[TierSpec], request: TurnRequest, *, runs: int, fast_forward: bool,
                 record: Path | None, prompt: str, json_target: str | None, warm: bool = False,
                 stall_threshold_s: float = 0.25, header_extra: dict[str, Any] | None = None,
                 voice: VoiceSettings | None = None, speaker: Speaker | None = None,
                 scenario: Scenario | None = None, loop: str | None = None, what_if: float = WHAT_IF_FACTOR,
                 pace: Callable[[int, Clock], Clock] | None = None, paced: str | None = None,
                 exports: dict[str, str] | None = None) -> int:
    """Run, print, and return the exit code (0 all ok, 1 a run failed). With ``speaker``, one lane is spoken
    aloud as it streams, and the run waits for the voice to finish. With ``scenario`` every lane plays that
    agent loop (``loop`` names a recorded one being replayed) and a bottleneck table follows, with a what-if
    for a model ``what_if``× faster. ``pace`` wraps each run's clock (a replay's speed and idle cap) and ``paced``
    says so on stderr. ``exports`` maps a format (``markdown``, ``csv``) to a file, or ``-``."""
    from .export_files import check_exports

    exports = exports or {}
    check_exports(exports, json_target)
    loop = scenario.name if scenario is not None else loop
    err = tables.console(stderr=True)
    if json_target not in (None, "-"):  # find out now, not after a long race
        folder = Path(json_target).parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise TokraceError(f"{json_target}: cannot write the JSON (no writable folder {folder})")
    recorder = (Recorder(record, prompt, tiers, scenario=loop, extra=header_extra)
                if record is not None else None)
    listeners: list[Listener] = [recorder] if recorder is not None else []
    if speaker is not None:
        listeners.append(speaker)
    progress = BenchProgress(err, runs, len(tiers), loop is not None) if BenchProgress.wanted(err) else None
    if progress is not None:
        listeners.append(progress)
        progress.start()

    def on_start(run: int) -> None:
        if recorder is not None:
            recorder.run = run
        if progress is not None:
            progress.run_started(run)

    def on_end(run: int) -> None:
        if progress is not None:
            progress.run_ended(run)

    terminated: list[int] = []

    finished: list[SessionResult] = []

    async def session() -> None:
        # Returns nothing: asyncio.run (3.11) puts its main task in the SIGINT handler it restores at the end, and
        # restoring it formats that handler's repr, with the task's result: every event of the session.
        main = asyncio.current_task()
        assert main is not None

        def terminate() -> None:  # as asyncio.run does for SIGINT: every lane ends as stopped, then we exit
            terminated.append(signal.SIGTERM)
            main.cancel()

        forget: Callable[[], None] | None = None
        with contextlib.suppress(ValueError):  # no signals off the main thread
            forget = insist(signal.SIGTERM, EXIT_TERMINATED, terminate)
        try:
            done = await run_session(tiers, request, runs=runs, fast_forward=fast_forward,
                                     listeners=listeners, on_run_start=on_start, on_run_end=on_end,
                                     warm=warm, stall_threshold_s=stall_threshold_s, scenario=scenario,
                                     loop=loop is not None, pace=pace)
            if speaker is not None:
                await speaker.drain()
            finished.append(done)
        finally:
            if forget is not None:
                forget()
            if speaker is not None:
                await speaker.aclose()

    try:
        asyncio.run(session())
        result = finished[0]
    except asyncio.CancelledError:
        if terminated:
            raise Terminated() from None
        raise
    finally:
        if progress is not None:
            progress.stop()
        if recorder is not None:
            with contextlib.suppress(RecordingError):  # kept in recorder.problem, said once below
                recorder.close()
    stopped = [f"{recorder.problem}; the recording stopped there (what it holds replays), the race went on"
               ] if recorder is not None and recorder.problem else []
    for warning in [*result.warnings, *stopped, *(speaker.problems if speaker is not None else [])]:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if paced is not None:
        err.print(paced, style="dim", highlight=False, markup=False)
    if json_target != "-" and "-" not in exports.values():
        out = tables.console()
        print_table(out, results_table(result, runs))
        note = cells.tokens_note(result)
        if note is not None:
            err.print(note, style="dim", highlight=False, markup=False)
        if loop is not None:
            print_table(out, bottleneck_table(result, what_if, loop, runs))
            line = speedup_line(result, what_if)
            if line is not None:
                out.print(escape(line), highlight=False)
        if voice is not None:
            print_table(out, voice_table(result, voice, runs))
            out.print(verdict_line(result, voice), highlight=False)
    if json_target is not None:
        write_json(result, json_target, voice)
    if exports:
        from tokrace.providers.export.race_data import ExportSource

        from .export_files import write_exports

        created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_exports(ExportSource(result, prompt, str(record) if record is not None else "", loop,
                                   created, what_if), exports)
    if recorder is not None:
        what = "partly recorded" if recorder.problem else "recorded"
        err.print(f"{what} to {record}", style="dim", highlight=False, markup=False)
    return 0 if result.all_ok else 1
