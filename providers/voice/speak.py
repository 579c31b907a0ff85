"""Hearing a lane: each completed sentence of its answer is piped to a text-to-speech command as it completes.

One process per sentence, fed the sentence on stdin, one after the other so sentences never overlap: that
works with ``espeak-ng``, ``say``, a ``piper … | aplay`` pipeline, or any command that reads text from stdin.
The race only ever appends to a queue; a background task does the speaking, so it never slows the readers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from ..model.events import Delta, Done, Error, Event, Request
from .lens import SentenceSplitter


class Speaker:
    """A race listener that speaks one lane's answer aloud, sentence by sentence (the voice lens's rule)."""

    def __init__(self, argv: Sequence[str], lane: int = 0) -> None:
        if not argv:
            raise ValueError("a text-to-speech command is needed")
        self.argv = list(argv)
        self.lane = lane
        self.problems: list[str] = []
        """What went wrong while speaking (the command failed to start or exited with an error), once each."""
        self._splitter = SentenceSplitter()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._broken = False

    def __call__(self, lane: int, event: Event) -> None:
        """The listener: quick, never raises, never waits."""
        if lane != self.lane:
            return
        if isinstance(event, Request):
            self._splitter = SentenceSplitter()
        elif isinstance(event, Delta) and event.channel == "content" and event.text:
            for _, _, sentence in self._splitter.feed_sentences(event.text):
                self._say(sentence)
        elif isinstance(event, Done):
            last = self._splitter.finish_sentence()
            if last is not None:
                self._say(last[2])
        elif isinstance(event, Error):
            self._splitter = SentenceSplitter()  # an unfinished sentence of a failed turn is never spoken

    def _say(self, sentence: str) -> None:
        text = " ".join(sentence.split())
        if not text or self._broken:
            return
        self._queue.put_nowait(text)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while True:
            text = await self._queue.get()
            try:
                if not self._broken:
                    await self._speak(text)
            finally:
                self._queue.task_done()

    async def _speak(self, text: str) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            self._broken = True
            self.problems.append(f"the text-to-speech command {self.argv[0]!r} could not start: "
                                 f"{exc.strerror or exc}")
            return
        _, err = await self._proc.communicate((text + "\n").encode("utf-8"))
        if self._proc.returncode and not self.problems:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            said = f": {lines[-1]}" if lines else ""
            self.problems.append(f"the text-to-speech command {self.argv[0]!r} exited with status "
                                 f"{self._proc.returncode}{said}")
        self._proc = None

    async def drain(self) -> None:
        """Wait until every sentence so far has been spoken."""
        if self._task is not None and not self._task.done():
            await self._queue.join()

    async def aclose(self) -> None:
        """Stop speaking at once: the queue is dropped and a sentence being spoken is cut off."""
        proc, self._proc = self._proc, None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._queue = asyncio.Queue()
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
