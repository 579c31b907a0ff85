"""The progress line of ``tokrace bench`` on stderr while it races: how long so far, how many lanes are done and
how many model requests they made (a coding loop runs for minutes), and with ``--runs N`` which run this is.
Shown only when stderr is a terminal, and erased at the end, so piped or logged output stays clean."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from tokrace.providers.model.events import Done, Error, Event, Request, is_loop_end


class BenchProgress:
    """A race listener that keeps one transient progress line up to date."""

    def __init__(self, console: Console, runs: int, lanes: int, loop: bool) -> None:
        self.runs = runs
        self.lanes = lanes
        self.loop = loop
        """A lane is done at its loop's end, not at its first answer."""
        self._done: set[int] = set()
        self._requests = 0
        columns: list[ProgressColumn] = [TextColumn("[bold]racing[/]"), TextColumn("{task.description}")]
        if runs > 1:
            columns += [BarColumn(), MofNCompleteColumn()]
        self._progress = Progress(*columns, TimeElapsedColumn(), console=console, transient=True)
        self._task: TaskID = self._progress.add_task(self._describe(), total=runs)

    @staticmethod
    def wanted(console: Console) -> bool:
        """Only on a terminal: a log or a pipe gets no progress line."""
        return console.is_terminal

    def start(self) -> None:
        self._progress.start()

    def stop(self) -> None:
        self._progress.stop()

    def run_started(self, run: int) -> None:
        self._done.clear()
        self._requests = 0
        self._progress.update(self._task, description=self._describe())

    def run_ended(self, run: int) -> None:
        self._progress.update(self._task, completed=run + 1)

    def __call__(self, lane: int, event: Event) -> None:
        if isinstance(event, Request):
            self._requests += 1
        elif isinstance(event, Error) or (is_loop_end(event) if self.loop else isinstance(event, Done)):
            self._done.add(lane)
        else:
            return
        self._progress.update(self._task, description=self._describe())

    def on_deltas(self, lane: int, deltas: Sequence[Event]) -> None:
        """Deltas handed over together (``Race.emit_many``): nothing it shows changes with them."""

    def _describe(self) -> str:
        requests = f" · {self._requests} model request{'s' if self._requests != 1 else ''}" if self.loop else ""
        return f"{len(self._done)} of {self.lanes} lanes done{requests}"
