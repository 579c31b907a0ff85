"""What the race screen offers by name: the keys help lists, and the command palette's commands."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from textual.binding import Binding

if TYPE_CHECKING:
    from .race import RaceScreen

REPLAY_ACTIONS = frozenset({"restart", "pause", "step", "faster", "slower"})
RACE_ACTIONS = frozenset({"race", "edit_prompt"})
VOICE_ACTIONS = frozenset({"voice_slower", "voice_faster"})
"""Only while the voice lens is on (help lists them always)."""
WHAT_IF_ACTIONS = frozenset({"what_if_faster", "what_if_slower"})
"""Only while the bottleneck view is shown (help lists them always)."""


def key_help(screen: RaceScreen) -> list[tuple[str, str]]:
    """(keys, what they do) for every binding the screen offers now."""
    out = []
    for binding in screen.BINDINGS:
        assert isinstance(binding, Binding)
        action, _, params = binding.action.partition("(")
        allowed = action in VOICE_ACTIONS | WHAT_IF_ACTIONS or screen.check_action(action.removeprefix("app."),
                                                                                   (0,) if params else ())
        if not binding.show or allowed is False:
            continue
        out.append((binding.key_display or binding.key, binding.tooltip or binding.description))
    return out


def commands(screen: RaceScreen) -> Iterator[tuple[str, str, Callable[[], object]]]:
    """(title, help, callback) for the command palette, on the screen as it is now."""
    replay = screen.replay is not None
    if replay:
        yield "Restart the replay", "play the recording again from its start", screen.action_restart
    else:
        yield "Race again", "race the prompt again on every tier", screen.action_race
    yield "Stop", "stop every lane still running", screen.action_stop
    if replay:
        yield "Pause or play", "pause the replay, or play it on", screen.action_pause
        yield "Step", "pause and move a tenth of a second, or to the next event", screen.action_step
        yield "Faster", "play faster", screen.action_faster
        yield "Slower", "play slower", screen.action_slower
    else:
        yield "Edit the prompt", "change the prompt and race again", screen.action_edit_prompt
    for view in screen.views:
        name = literal(view.lane.tier.name)
        yield (f"Details: {name}", f"every metric of {name}, its definition and its source",
               functools.partial(screen.show_details, view.index))
    yield "Zoom the timeline", "cycle ×1, ×2, ×4, ×8 from the start of the race", screen.action_zoom
    yield ("Bottlenecks", "where each lane's time goes: model, tools, people, waits; the Amdahl bound; what a "
           "faster model would do", screen.action_bottlenecks)
    if screen.bottlenecks.display:
        yield "What if: a faster model", "raise N in \"a model N× faster\"", screen.action_what_if_faster
        yield "What if: a slower model", "lower N in \"a model N× faster\"", screen.action_what_if_slower
    yield ("Voice lens on or off", "where a speaking voice would be in every lane's answer, and when it "
           "would fall silent", screen.action_voice)
    if screen.voice.on:
        yield "Speak faster", "the voice lens speaks 15 words per minute faster", screen.action_voice_faster
        yield "Speak slower", "the voice lens speaks 15 words per minute slower", screen.action_voice_slower
    yield ("Export…", "write this race beside its recording: Markdown, HTML, CSV, SVG, asciicast or "
           "OpenTelemetry JSON", screen.action_export)
    yield "Help", "keys, colours and where the numbers come from", screen.action_help


def literal(text: str) -> str:
    """``text`` as Textual markup that shows it as it is (the command palette reads its titles as markup)."""
    return text.replace("[", "\\[")
