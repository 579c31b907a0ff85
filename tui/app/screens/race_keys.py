"""The race screen's keys: each binding, what it does and when it applies (help and the footer list them)."""

from __future__ import annotations

from typing import Final

from textual.binding import Binding, BindingType

REPLAY_ACTIONS = frozenset({"restart", "pause", "step", "faster", "slower"})
RACE_ACTIONS = frozenset({"race", "edit_prompt"})
VOICE_ACTIONS = frozenset({"voice_slower", "voice_faster"})
"""Only while the voice lens is on (help lists them always)."""
WHAT_IF_ACTIONS = frozenset({"what_if_faster", "what_if_slower"})
"""Only while the bottleneck view is shown (help lists them always)."""

RACE_BINDINGS: Final[list[BindingType]] = [
    Binding("r", "race", "Race", tooltip="race the prompt again on every tier (stops a race still running)"),
    Binding("r", "restart", "Restart", tooltip="play the recording again from its start"),
    Binding("s", "stop", "Stop", tooltip="stop every lane still running"),
    Binding("space", "pause", "Pause", tooltip="pause the replay, or play it on"),
    Binding("full_stop", "step", "Step", key_display=".",
            tooltip="pause and move a tenth of a second, or to the next event when nothing happens sooner"),
    Binding("plus,equals_sign", "faster", "Faster", key_display="+", tooltip="play faster (up to ×16)"),
    Binding("minus", "slower", "Slower", key_display="-", tooltip="play slower (down to ×0.1)"),
    Binding("d", "details", "Details", tooltip="every metric of the focused lane: value, source, definition"),
    Binding("z", "zoom", "Zoom", tooltip="zoom the timeline into its start: ×1, ×2, ×4, ×8"),
    Binding("b", "bottlenecks", "Bottlenecks", tooltip="the bottleneck view instead of the lanes (b again "
            "leaves it): where each lane's time goes, the model's share, the Amdahl bound, a what-if"),
    Binding("greater_than_sign", "what_if_faster", "N×", key_display="< >",
            tooltip="in the bottleneck view: what if the model were more (>) or less (<) times faster"),
    Binding("less_than_sign", "what_if_slower", "Slower model", key_display="<", show=False,
            tooltip="in the bottleneck view: what if the model were less times faster (<)"),
    Binding("v", "voice", "Voice", tooltip="voice lens on every lane: where a speaking voice would be in the "
            "answer (spoken text underlined), when it starts, when it falls silent (stalls on the timeline)"),
    Binding("right_square_bracket", "voice_faster", "wpm", key_display="[ ]",
            tooltip="with the voice lens: speak 15 words per minute faster (]) or slower ([)"),
    Binding("left_square_bracket", "voice_slower", "Slower voice", key_display="[", show=False,
            tooltip="with the voice lens: speak 15 words per minute slower ([)"),
    Binding("p,slash", "edit_prompt", "Prompt", key_display="p",
            tooltip="edit the prompt (also /); Enter races it, Escape leaves"),
    Binding("1", "focus_lane(0)", "Lane", key_display="1-6",
            tooltip="focus a lane (for details; arrows scroll its final answer)"),
    *(Binding(str(i + 1), f"focus_lane({i})", f"Lane {i + 1}", show=False) for i in range(1, 6)),
    Binding("question_mark,f1", "help", "Help", key_display="?", tooltip="this help (also F1)"),
    Binding("q", "app.quit", "Quit", tooltip="quit (also ctrl+q)"),
    Binding("escape", "leave_prompt", "Leave the prompt", show=False),
]
