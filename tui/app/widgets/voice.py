"""The voice lens in a lane: the answer with the speech playhead moving through it, and the voice's numbers.

The screen samples the live voice (``tokrace.providers.voice.live``) once a frame and hands each lane a
:class:`~providers.voice.live.VoiceNow`. The text is wrapped incrementally (only its last lines are redone as it
grows) and only the lines around the playhead are drawn, so a frame costs the size of the widget.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Final

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from tokrace.providers.model.units import GLUE, duration
from tokrace.providers.voice.lens import CONVERSATION_GAP_S
from tokrace.providers.voice.live import VoiceLane, VoiceNow, VoiceShown

from .palette import palette
from .printable import printable
from .tail import _cut, _width

_TOKEN: Final[re.Pattern[str]] = re.compile(r"\n|[^\S\n]+|\S+")

STATE_LABEL: Final[dict[VoiceShown, str]] = {
    "waiting": "waiting to speak", "speaking": "speaking", "silent": "silent", "spoken": "spoken",
    "mute": "nothing to say",
}
STATE_SEGMENT: Final[dict[VoiceShown, str]] = {
    "waiting": "pending", "speaking": "model", "silent": "stall", "spoken": "think", "mute": "wait",
}
"""The timeline colour each voice state borrows for its badge (silent is the stall colour, as on the timeline)."""

HINT: Final[str] = "the voice starts once the answer's first sentence is complete"

Span = tuple[int, int]


def wrap_spans(text: str, width: int, done: Sequence[Span] = ()) -> list[Span]:
    """Word-wrap ``text`` to ``width`` cells as (start, end) offsets of each line, as the tail view wraps.

    ``done`` are the lines of an earlier wrap of a prefix of ``text`` at the same width: only its last two lines
    are redone, so a growing answer costs what it grew by."""
    width = max(width, 1)
    keep = max(len(done) - 2, 0)
    lines = list(done[:keep])
    line_start = done[keep][0] if keep < len(done) else 0
    used = 0
    for m in _TOKEN.finditer(text, line_start):
        a, b = m.span()
        word = m.group()
        if word == "\n":
            lines.append((line_start, a))
            line_start, used = b, 0
            continue
        size = _width(word)
        if word.isspace():
            if used == 0 and lines:  # a wrapped line does not start with the space that broke it
                line_start = b
                continue
            if used + size > width:
                lines.append((line_start, a))
                line_start, used = b, 0
                continue
        elif used + size > width and used > 0:
            lines.append((line_start, a))
            line_start, used = a, 0
        while size > width:  # a word wider than the line: cut it
            cut = width if word.isascii() else len(_cut(word, width))
            lines.append((a, a + cut))
            a += cut
            word = word[cut:]
            size = _width(word)
            line_start = a
        used += size
    lines.append((line_start, len(text)))
    return lines


class VoiceText(Widget):
    """The voiced answer: spoken text marked in the lane's colour and underlined, the playhead a reversed cell,
    text not yet speakable (an unfinished sentence) dim. Scrolls to keep the playhead in view."""

    DEFAULT_CSS = """
    VoiceText { height: 1fr; }
    """

    def __init__(self, lane_index: int = 0, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lane_index = lane_index
        self.voice: VoiceNow | None = None
        self._text = ""
        self._width = -1
        self._lines: list[Span] = []
        self._starts: list[int] = []
        self._shown: object = None
        """What the last repaint showed: a new moment that looks the same is not drawn again."""
        self._top: tuple[VoiceNow | None, object, int] = (None, None, 0)
        self._styles_key: tuple[Style, object] | None = None
        self._style_map: dict[str, Style] = {}

    def show(self, voice: VoiceNow) -> None:
        """Draw the voice at a new moment: a repaint, only when what is in view changed (text arriving below the
        view, or a playhead moving within a character, draws nothing), never a layout pass."""
        if voice == self.voice:
            return
        self.voice = voice
        width, height = self.size
        if not voice.text or height <= 0:
            key: object = (voice.state, width, height)
        else:
            lines = self._wrapped(voice.text, width)
            top = self.top()
            start = lines[top][0]
            end = lines[top + height][0] if top + height < len(lines) else len(voice.text) + 1
            cursor = voice.state in ("speaking", "silent")
            key = (cursor, min(voice.spoken, end), min(voice.ready, end), voice.text[start:end], top, width, height)
        if key != self._shown:
            self._shown = key
            self.refresh()

    def _wrapped(self, text: str, width: int) -> list[Span]:
        if text is not self._text or width != self._width:
            grew = width == self._width and text.startswith(self._text)
            self._lines = wrap_spans(text, width, self._lines if grew else ())
            self._starts = [a for a, _ in self._lines]
            self._text, self._width = text, width
        return self._lines

    def top(self) -> int:
        """The first line shown: the playhead's line a third of the way down, as far as the text allows."""
        voice = self.voice
        width, height = self.size
        if voice is None or height <= 0:
            return 0
        if self._top[0] is voice and self._top[1] == self.size:  # once per moment, not once per line drawn
            return self._top[2]
        lines = self._wrapped(voice.text, width)
        at = max(bisect.bisect_right(self._starts, voice.spoken) - 1, 0)
        top = min(max(at - height // 3, 0), max(len(lines) - height, 0))
        self._top = (voice, self.size, top)
        return top

    def _styles(self, base: Style) -> dict[str, Style]:
        pal = palette(self.app)
        if self._styles_key != (base, pal):
            self._styles_key = (base, pal)
            lane = pal.lane(self.lane_index)
            self._style_map = {
                "said": base + lane + Style(underline=True), "ready": base, "arriving": base + Style(dim=True),
                "head": base + lane + Style(reverse=True, bold=True), "hint": base + Style(dim=True, italic=True),
            }
        return self._style_map

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.visual_style.rich_style
        voice = self.voice
        styles = self._styles(base)
        if voice is None or not voice.text:
            if y == 0 and voice is not None and voice.state == "waiting":
                return Strip([Segment(HINT[:width], styles["hint"])]).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        lines = self._wrapped(voice.text, width)
        index = self.top() + y
        if index >= len(lines):
            return Strip.blank(width, base)
        a, b = lines[index]
        text, spoken, ready = voice.text, voice.spoken, voice.ready
        head = styles["head"]
        cursor = spoken if voice.state in ("speaking", "silent") else -1
        segments: list[Segment] = []

        def put(start: int, end: int, style: Style) -> None:
            if end > start:
                segments.append(Segment(printable(text[start:end]), style))

        cut = min(max(spoken, a), b)
        put(a, cut, styles["said"])
        rest = cut
        if a <= cursor < b:
            put(cursor, cursor + 1, head)
            rest = cursor + 1
        put(rest, min(max(ready, rest), b), base)
        put(max(ready, rest), b, styles["arriving"])
        if cursor == len(text) and index == len(lines) - 1:
            segments.append(Segment(" ", head))  # caught up with the text: the playhead waits after its end
        return Strip(_split_leading_spaces(segments)).adjust_cell_length(width, base)


_SPACER: Final[Style] = Style(reverse=False)
"""Looks like nothing, but keeps a run of spaces apart from the same style's words when runs are merged."""


def _split_leading_spaces(segments: list[Segment]) -> list[Segment]:
    """A run's leading spaces as a run of their own: SVG viewers drop an element's leading spaces and would
    glue the run's words to the run before it in screenshots; a run of spaces alone is never exported."""
    out: list[Segment] = []
    for seg in segments:
        body = seg.text.lstrip(" ")
        if out and body and len(body) < len(seg.text) and seg.style is not None and not seg.style.reverse:
            out.append(Segment(seg.text[: len(seg.text) - len(body)], seg.style + _SPACER))
            seg = Segment(body, seg.style)
        out.append(seg)
    return out


def pack(parts: Sequence[Text], width: int, sep: str = " · ") -> Text:
    """Join parts with ``sep``, starting a new line instead of cutting a part (a part wider than a line stays
    whole and is cut by the widget). The separator's leading spaces are a run of their own (explicitly not
    reversed, after a badge), so screenshots keep them (see :func:`_split_leading_spaces`)."""
    out = Text()
    used = 0
    body = sep.lstrip(" ")
    for part in parts:
        size = part.cell_len
        if used and used + len(sep) + size > width:
            out.append("\n")
            used = 0
        elif used:
            out.append(sep[: len(sep) - len(body)], style=_SPACER)
            out.append(body)
            used += len(sep)
        out.append_text(part)
        used += size
    return out


def seconds(value: float | None) -> str:
    """A voice figure: a number never split from its unit when the bar wraps."""
    return duration(value, glue=GLUE)


class VoiceBar(Static):
    """The voice's state and numbers under its text: state, rate, stalls and silence, first audio, TTFS, the
    smallest margin and the lead now (ready text not yet spoken, in speech seconds). Repainted a few times a
    second; a layout pass only when its height changes."""

    DEFAULT_CSS = """
    VoiceBar { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, lane_index: int = 0, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes)
        self.lane_index = lane_index
        self.aloud = False
        """This lane is the one spoken aloud (``--speak``)."""
        self.shown = ""
        self._rows = 0
        self._last: tuple[VoiceNow, float] | None = None

    def figures(self, voice: VoiceNow, wpm: float) -> list[Text]:
        pal = palette(self.app)
        state = Text(f" {STATE_LABEL[voice.state]} ",
                     style=pal.segment(STATE_SEGMENT[voice.state]) + Style(reverse=True, bold=True))
        stalls = Text(f"{voice.stalls} stall{'' if voice.stalls == 1 else 's'}",
                      style=pal.segment("stall") if voice.stalls else "")
        first = voice.first_audio_s
        late = "bold" if first is not None and first > CONVERSATION_GAP_S else ""
        if voice.turns > 1:  # a turn's own figure, then the run's (the one the verdict judges), each named
            slowest = voice.slowest_audio_s
            audio = [Text(f"turn {voice.turn + 1} 1st audio {seconds(first)}", style=late),
                     Text(f"slowest 1st audio {seconds(slowest)}",
                          style="bold" if slowest is not None and slowest > CONVERSATION_GAP_S else "")]
        else:
            audio = [Text(f"1st audio {seconds(first)}", style=late)]
        ttfs = f"turn {voice.turn + 1} TTFS" if voice.turns > 1 else "TTFS"
        parts = [state, Text(f"{wpm:g} wpm"), stalls, Text(f"{duration(voice.silent_s, 1, glue=GLUE)} silent"), *audio,
                 Text(f"{ttfs} {seconds(voice.ttfs_s)}"), Text(f"margin {seconds(voice.margin_s)}")]
        if voice.state in ("speaking", "silent", "waiting") and voice.ready > voice.spoken:
            parts.append(Text(f"lead {duration(voice.ahead_s, 1, glue=GLUE)}"))
        if self.aloud:
            parts.append(Text("♪ aloud", style=pal.lane(self.lane_index)))
        return parts

    def show(self, voice: VoiceNow, wpm: float) -> None:
        self._last = (voice, wpm)
        text = pack(self.figures(voice, wpm), max(self.size.width, 20))
        plain = text.plain
        if plain != self.shown:
            rows = plain.count("\n") + 1
            self.update(text, layout=rows != self._rows)
            self.shown, self._rows = plain, rows

    def on_resize(self) -> None:
        if self._last is not None:  # packed for another width (or before the first layout)
            self.show(*self._last)


class VoicePanel(Vertical):
    """A lane's voice lens: the voiced text over the voice bar (shown instead of the tail in voice mode)."""

    DEFAULT_CSS = """
    VoicePanel { height: 1fr; }
    """

    def __init__(self, lane_index: int = 0, *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.text = VoiceText(lane_index, classes="voice-text")
        self.bar = VoiceBar(lane_index, classes="voice-bar")

    def compose(self) -> ComposeResult:
        yield self.text
        yield self.bar

    def sample(self, lane: VoiceLane, now: float, wpm: float, slow: bool) -> None:
        """The playhead every frame; the numbers when ``slow``, or when the state changed."""
        voice = lane.now(now, wpm, figures=slow)
        old = self.text.voice
        if not slow and (old is None or old.state != voice.state):
            voice, slow = lane.now(now, wpm), True
        self.text.show(voice)
        if slow:
            self.bar.show(voice, wpm)


class Glued:
    """Rich text wrapped at ordinary spaces only: Rich and Textual break a line at any whitespace, a no-break space
    too, so "first audio 1.78 s" could end a line with "1.78" and start the next with "s"."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield glued_lines(self.text, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)


def glued_lines(text: Text, width: int) -> Text:
    """``text`` with a line break put in place of the last ordinary space before each line would pass ``width``
    cells; a no-break space never ends a line (a word longer than the width is left for Rich to fold)."""
    plain = text.plain
    out = text.copy()
    if width <= 0:
        return out
    breaks: list[int] = []
    start, last_space = 0, -1
    for i, char in enumerate(plain):
        if char == "\n":
            start, last_space = i + 1, -1
            continue
        if char == " ":
            last_space = i
        if cell_len(plain[start:i + 1].rstrip(" ")) > width and last_space > start:
            breaks.append(last_space)
            start, last_space = last_space + 1, -1
    if not breaks:
        return out
    pieces = [out[a + 1 if a >= 0 else 0:b] for a, b in zip([-1, *breaks], [*breaks, len(plain)], strict=True)]
    return Text("\n").join(pieces)


def verdict_line(names: Sequence[str], verdicts: Sequence[tuple[bool, str]], rates: Sequence[float]) -> Glued:
    """Which tiers could hold a conversation without a gap, and why the others could not (as bench says it), at
    the rates the voices spoke at during the race (``rates``, in order: never one set after it)."""
    spoken = " then ".join(f"{wpm:g}" for wpm in rates)
    rule = f"first audio within {CONVERSATION_GAP_S:g}{GLUE}s, never silent mid-answer, at {spoken}{GLUE}wpm"
    holds = [name for name, (ok, _) in zip(names, verdicts, strict=True) if ok]
    gaps = [f"{name} ({why})" for name, (ok, why) in zip(names, verdicts, strict=True) if not ok]
    text = Text()
    if not holds:
        text.append("no tier could hold a conversation without a gap", style="bold")
        text.append(f" ({rule}): {', '.join(gaps)}")
        return Glued(text)
    text.append("could hold a conversation without a gap", style="bold")
    text.append(f" ({rule}): ")
    text.append(", ".join(holds), style="bold")
    if gaps:  # a late first audio is not a gap mid-answer: "not", as bench says it, with the reason
        text.append(" · not: ", style="bold")
        text.append(", ".join(gaps))
    return Glued(text)


def voice_status(wpm: float, tts_delay_s: float, spoken: str | None) -> Text:
    """The line under the lanes while the voice lens is on and the race goes on."""
    text = Text("voice lens", style="bold")
    text.append(f" · {wpm:g} wpm ([ ] ±15) · TTS delay {tts_delay_s * 1000:.0f} ms")
    if spoken is not None:
        text.append(f" · spoken aloud: {spoken}")
    return text
