"""A lane's text, kept within bounds: its latest pieces for the visible tail, and its answer for the final Markdown
(the recording has all of it)."""

from __future__ import annotations

from collections import deque
from typing import Final

TAIL_KEEP: Final[int] = 64 * 1024
"""Characters of a lane's latest text kept for its visible tail (a screen shows a few thousand at most)."""

ANSWER_KEEP: Final[int] = 256 * 1024
"""Characters of a lane's answer kept for its final Markdown; the recording has all of it."""


class LaneText:
    """A lane's latest text and its answer, each kept to its limit."""

    __slots__ = ("_answer", "_answer_chars", "_piece_chars", "answer_cut", "pieces")

    def __init__(self) -> None:
        self.pieces: deque[tuple[str, str]] = deque()
        """The lane's latest text, in order, as (channel, text); ``meta`` marks tool calls and turns. Only the last
        ``TAIL_KEEP`` characters or so are kept: the screen draws the tail, and the recording has the rest."""
        self._piece_chars = 0
        self._answer: deque[str] = deque()
        """The visible answer of every turn (content, and turn breaks), its last ``ANSWER_KEEP`` characters."""
        self._answer_chars = 0
        self.answer_cut = 0
        """Characters of the answer that are no longer kept (the recording has them)."""

    def add(self, channel: str, text: str) -> None:
        """Keep a piece of the lane's text: in the tail, and in the answer when it is answer text (or a turn's
        break); the oldest pieces go once more than the limit is kept. Constant time per piece."""
        pieces = self.pieces
        size = len(text)
        pieces.append((channel, text if size <= TAIL_KEEP else text[-TAIL_KEEP:]))  # not a huge event's whole text
        chars = self._piece_chars = self._piece_chars + min(size, TAIL_KEEP)
        if chars > TAIL_KEEP:
            while self._piece_chars > TAIL_KEEP and len(pieces) > 1:
                self._piece_chars -= len(pieces.popleft()[1])
        if channel == "content" or (channel == "meta" and text == "\n\n"):
            answer = self._answer
            if size > ANSWER_KEEP:
                self.answer_cut += size - ANSWER_KEEP
                text, size = text[-ANSWER_KEEP:], ANSWER_KEEP
            answer.append(text)
            self._answer_chars += size
            while self._answer_chars > ANSWER_KEEP and len(answer) > 1:
                gone = len(answer.popleft())
                self._answer_chars -= gone
                self.answer_cut += gone

    def drop_tool_args(self) -> None:
        """Take the latest pieces of a tool call's arguments off the tail (the call says them once, whole)."""
        while self.pieces and self.pieces[-1][0] == "tool_args":
            self._piece_chars -= len(self.pieces.pop()[1])

    def tail(self, chars: int) -> list[tuple[str, str]]:
        """The last pieces holding at least ``chars`` characters (the first one cut), for the visible tail."""
        out: list[tuple[str, str]] = []
        need = chars
        for channel, text in reversed(self.pieces):
            if need <= 0:
                break
            if len(text) > need:
                text = text[-need:]
            out.append((channel, text))
            need -= len(text)
        out.reverse()
        return out

    def answer(self) -> str:
        """The visible answer of every turn (content only), for the final Markdown: its last ``ANSWER_KEEP``
        characters, after a line that says so when it is longer."""
        text = "".join(self._answer).strip()
        if self.answer_cut:
            return f"*… the first {self.answer_cut:,} characters are in the recording*\n\n{text}"
        return text
