"""The race screen: a prompt bar, the lanes side by side (stacked when narrow), the shared timeline, the summary.

One timer samples the live model at frame rate and hands each widget what it needs; no event ever touches a
widget. Text and the timeline repaint at 15 Hz (only the lines that changed), gauges and figures under four times a
second; nothing repaints while nothing moves.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static

from tokrace.providers.model.masking import redact
from tokrace.providers.race.live import LiveRace
from tokrace.providers.recording.writer import secret_values
from tokrace.providers.timing.clock import COARSE_WAKE_S, RealClock
from tokrace.providers.voice.live import WPM_STEP, LiveVoice

from ..render import after_first_frame, draw_by_lines, draw_now
from ..widgets.footer import RaceFooter
from ..widgets.frame_static import StatusLine
from ..widgets.gauge import nice_scale
from ..widgets.lane import LaneView, gauge_peak
from ..widgets.prompt import PromptInput
from ..widgets.replay_bar import ReplayBar
from ..widgets.summary import racing_line, summary_line, with_pace
from ..widgets.timeline import Timeline
from ..widgets.voice import verdict_line, voice_status
from .race_keys import RACE_ACTIONS, RACE_BINDINGS, REPLAY_ACTIONS, VOICE_ACTIONS, WHAT_IF_ACTIONS

if TYPE_CHECKING:
    from tokrace.providers.metrics.turn import SegmentSpan
    from tokrace.providers.runs.replay_control import ReplayControl
    from tokrace.providers.runs.runner import RaceRunner
    from tokrace.providers.voice.speak import Speaker

    from ..widgets.bottleneck import BottleneckView

FRAME_HZ = 15
"""Frames a second while anything moves. Each frame repaints only what changed since the last: the streaming text
(15 Hz reads as smoothly as 30, and every frame of text is a repaint of the lines it moved), the timeline, a state;
the widgets whose figures change with time itself at their own, slower pace."""
SLOW_EVERY = 4
"""Gauges and figures repaint every 4th frame (under 4 Hz)."""
IDLE_HZ = 2
"""The frame rate once nothing has changed for ``IDLE_AFTER`` frames (a finished race, a paused replay): enough to
notice what changes next without a key press (a problem to report), at a fifteenth of the work."""
IDLE_AFTER = FRAME_HZ



class RaceScreen(Screen[None]):
    """Lanes, timeline and summary, for a live race or a replay."""

    CSS_PATH = "race.tcss"
    AUTO_FOCUS = ""
    """Nothing focused at start: keys go to the screen, not the prompt bar."""
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (Textual types it as an instance attribute)
    VERTICAL_BREAKPOINTS = [(0, "-low"), (24, "-high")]  # noqa: RUF012 (as above)
    BINDINGS: ClassVar[list[BindingType]] = RACE_BINDINGS

    def __init__(self, runner: RaceRunner, replay: ReplayControl | None = None, animate: bool = True,
                 freeze_gc: bool = True, voice: LiveVoice | None = None, speaker: Speaker | None = None,
                 podium: bool = False, present: bool = False) -> None:
        super().__init__()
        draw_by_lines(self)
        self.podium = podium
        """Show the finish line when a race ends (not when it is stopped)."""
        self.present = present
        """The presenter's view: gauges and timeline only, taller bars, final times, no notices, no footer."""
        self.runner = runner
        self.replay = replay
        self.voice = voice if voice is not None else LiveVoice()
        """The voice lens: on or off, its rate, a voice per lane (fed at frame rate from the race's events)."""
        self.speaker = speaker
        """Speaks one lane aloud (``--speak``)."""
        self._verdict_for: object = None
        self._speak_problems = 0
        self.animated = animate
        """Off in tests and screenshots: no frame timer (the test draws each frame), no cursor blink."""
        self.freeze_gc = freeze_gc
        """Keep the race's growing history out of the garbage collector's full passes while it runs."""
        self.views = [LaneView(i, lane, focused=i == 0, present=present) for i, lane in enumerate(runner.live.lanes)]
        self.timeline = Timeline(id="timeline")
        self.bottlenecks: BottleneckView | None = None
        """The bottleneck view, made when it is first shown (``b``): its code is not on the way to the first frame."""
        self.summary = StatusLine("", id="summary")
        self.voice_line = Static("", id="voice-line")
        self.notice = Static("", id="notice", markup=False)
        """The latest notification, on a line of its own above the footer: it never covers the lanes or the
        summary."""
        self._notice_shown: object = None
        self.replay_bar = ReplayBar(id="replay-bar") if replay is not None else None
        self.focused_lane = 0
        self._live: LiveRace = runner.live
        self._frame = 0
        self._peak = 0.0
        self._summarised: LiveRace | None = None
        self._summary_pace = ""
        self._problem_shown: str | None = None
        self._drawing_problem: str | None = None
        self._timer: asyncio.Task[None] | None = None
        self._hz = 0
        self.frame_open = False
        """Whether a frame is being sampled: :func:`repaint` then leaves the drawing to the frame's end."""
        self._last_key: tuple[object, ...] | None = None
        self._keys_running: bool | None = None
        """Whether a race ran when the keys were last worked out (the footer shows Stop enabled only then)."""
        self._still = 0
        """Frames in a row in which nothing changed."""
        self._submitted: str | None = None
        """The prompt last submitted with Enter: leaving the bar after Enter keeps it (it is about to race)."""
        self._shown = False

    # -- layout -------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        if self.replay is None:
            prompt = PromptInput(self.runner.request.prompt, placeholder="the prompt to race: Enter races it",
                           id="prompt", select_on_focus=False)
            prompt.cursor_blink = self.animated
            prompt.secrets = secret_values(self.runner.tiers)
            yield prompt
        else:
            assert self.replay_bar is not None
            yield self.replay_bar
            yield Static(f"prompt: {redact(self.runner.request.prompt, ())}", id="replay-prompt", markup=False)
            if self.replay is not None and self.replay.caption:
                yield Static(self.replay.caption, id="replay-verdict", markup=False)
        with Container(id="lanes"):
            yield from self.views
        yield self.timeline
        yield self.summary
        yield self.voice_line
        yield self.notice
        yield RaceFooter()

    def post_message(self, message: Message) -> bool:
        if isinstance(message, events.ScreenResume) and not self._shown:
            # Shown for the first time: styled as it was built, with its classes given before it was mounted, on
            # the theme and the stylesheets it shows with (a widget's own CSS applies inside it alone), so Textual's
            # restyling every widget of it again here would change nothing (it took 18 ms of the first frame).
            self._shown = True
            message.refresh_styles = False
        return super().post_message(message)

    def on_mount(self) -> None:
        if self.present:
            self.add_class("-present")
            self.timeline.strong = True
            for view in self.views:
                view.set_present(True)
        self.timeline.bind(self._live.lanes)
        self.timeline.overlay = self._voice_stalls
        if self.speaker is not None and self.speaker.lane < len(self.views):
            self.views[self.speaker.lane].voice.bar.aloud = True
        self._show_voice(self.voice.on)
        self._set_focused(0)
        if self.animated:
            self._pace(FRAME_HZ)
        after_first_frame(self, self._start)

    def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _start(self) -> None:
        if not self.runner.running and self.runner.races == 0:
            if self.animated:  # a person watches: the first race starts once the first frames are painted
                self.run_worker(self.runner.first_race(), group="race", exclusive=True, exit_on_error=False)
            else:
                self.runner.start()

    # -- the frame ------------------------------------------------------------------------------------------------

    def sample(self, force: bool = False) -> None:
        """Read the live model once and repaint what moved, drawing it at once (what :func:`repaint` marked: the
        screen's update runs here, not at its update timer's next tick); ``force`` repaints everything now."""
        try:
            self.frame_open = True
            try:
                self._sample(force)
            finally:
                self.frame_open = False
            draw_now(self)  # what the update timer does: lay out if needed, composite, write
        except Exception as exc:  # a drawing bug must not stop the race (nor the frame task) or put a traceback
            problem = f"{type(exc).__name__}: {exc}"  # on screen
            if problem != self._drawing_problem:
                self._drawing_problem = problem
                self.notify(problem, title="a frame could not be drawn", severity="error", markup=False)

    def _pace(self, hz: int) -> None:
        """Run the frame timer at ``hz`` frames a second."""
        if hz == self._hz:
            return
        self._hz = hz
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.create_task(self._frames(hz))

    async def _frames(self, hz: int) -> None:
        """The frame timer: a frame ``hz`` times a second (at 15 Hz, 64 ms apart), at moments on the grid the
        offline lanes, the recorder and an HTTP lane's looks at its socket wake on (``RealClock.sleep_until_coarse``,
        every other point of it, as the recorder), on the event loop's own timer.

        The process then wakes once for all of them, and each frame draws at once (:meth:`sample` runs the screen's
        update itself): Textual's timers would wake it at moments of their own, its screen update a second time per
        frame, and a wake-up of the process costs about 0.2 ms of CPU on a VM (three a frame were 1 % of a core)."""
        clock = RealClock()
        ahead = 1 / hz - COARSE_WAKE_S  # the first point at least this far ahead: 1 / hz, on the grid
        while True:
            await clock.sleep_until_coarse(clock.now() + ahead, cells=2)
            self.sample()

    def _unchanged(self, now: float, force: bool) -> bool:
        """Whether nothing the screen shows can have moved since the last frame: no lane changed, and no race runs
        (while one runs, time itself moves the figures and the timeline; the voice lens speaks on after a race).
        After ``IDLE_AFTER`` such frames the timer slows to ``IDLE_HZ``; the first change brings it back."""
        runner = self.runner
        moving = runner.running or self.voice.on
        key = (tuple(lane.version for lane in runner.live.lanes), runner.races, runner.running, self.voice.on,
               self.bottlenecks_shown, now if moving else None)
        same = key == self._last_key and not force
        if runner.running != self._keys_running:  # "Stop" is a key only while a race runs: dim once it ended
            self._keys_running = runner.running
            self.refresh_bindings()
        self._last_key = key
        self._still = self._still + 1 if same else 0
        if self.animated and self._timer is not None:
            self._pace(IDLE_HZ if self._still >= IDLE_AFTER else FRAME_HZ)
        return same

    def _sample(self, force: bool) -> None:
        runner = self.runner
        live = runner.live
        if live is not self._live:
            self._rebind(live)
        now = runner.now()
        if self._unchanged(now, force):
            self._show_notice()
            self._report_problems()
            return
        self._frame += 1
        slow = force or self._frame % SLOW_EVERY == 0
        scale = self._scale(now) if slow else nice_scale(self._peak)
        for view in self.views:
            view.sample(now, scale, slow)
        if self.voice.on:
            self._sample_voice(now, slow)
        self.timeline.sample(now)
        if slow and self.bottlenecks is not None and self.bottlenecks.display:
            self.bottlenecks.sample(runner, now)
        pace = self.replay.badge() if self.replay is not None else ""
        if slow or force:
            for view in self.views:
                view.set_pace(pace)
        if (slow or (live.finished and self._summarised is not live)) and self.replay is not None \
                and self.replay_bar is not None:
            # every lane has ended: the replay is finished, whatever the runner still winds down (one state), and
            # said so before the finish line covers the screen (the bar is not redrawn under it)
            self.replay_bar.show(self.replay.status(now, live.finished))
        if live.finished and runner.races:  # every lane has ended: the result, not "racing" beside it
            if self._summarised is not live or self._summary_pace != pace:
                ended = self._summarised is not live
                self._summarised, self._summary_pace = live, pace
                from tokrace.providers.race.summary import race_summary  # (loaded when a race first ends)

                summary = race_summary(live.lanes)
                self.summary.update(with_pace(summary_line(summary), pace))
                if ended and self.podium and not summary.stopped and runner.race is not None and self.is_current:
                    from .podium import PodiumScreen, finish  # (other screens load when first shown)
                    self.app.push_screen(PodiumScreen(finish(runner.race.lanes, runner.loop_name is not None)))
                if self.freeze_gc:  # collect what the race left while nothing streams; freeze what lives on
                    gc.unfreeze()
                    gc.collect()
                    gc.freeze()
        elif runner.races:  # every frame, as the lanes: it names their figures, so it is never behind them
            doing = "racing"
            if self.replay is not None:
                from tokrace.providers.runs.replay_control import replay_doing  # (loaded with the replay)

                doing = replay_doing(self.replay)
            self.summary.show_line(with_pace(racing_line(live, now, doing), pace, first=True))
        self._show_notice()
        self._report_problems()

    def _report_problems(self) -> None:
        """Say once what went wrong outside the lanes: the race could not run, a voice could not speak."""
        runner = self.runner
        if runner.problem and runner.problem != self._problem_shown:
            self._problem_shown = runner.problem
            self.notify(runner.problem, title="the race could not run", severity="error", markup=False)
        if self.speaker is not None and len(self.speaker.problems) > self._speak_problems:
            for problem in self.speaker.problems[self._speak_problems:]:
                self.notify(problem, title="cannot speak aloud", severity="error", markup=False)
            self._speak_problems = len(self.speaker.problems)

    def _show_notice(self) -> None:
        """The app's latest notification on the notice line (once per notification)."""
        notice = getattr(self.app, "notice", None)
        if notice is self._notice_shown:
            return
        self._notice_shown = notice
        if notice is None or self.present:  # a presenter's screen shows no notices (the terminal keeps them)
            self.notice.display = False
            return
        message, title, severity = notice
        self.notice.update(Content.assemble((f"{title}: " if title else "", "bold"), message.replace("\n", "; ")))
        self.notice.set_classes(f"-{severity}")
        self.notice.display = True

    # -- the voice lens ---------------------------------------------------------------------------------------------

    def _sample_voice(self, now: float, slow: bool) -> None:
        """Feed the voices what the race recorded since the last frame, then move every playhead to ``now``."""
        voice, race = self.voice, self.runner.race
        if race is None:
            changed = voice.follow(None, [[] for _ in self.views])
        else:
            changed = voice.follow(race, [lane.events for lane in race.lanes])
        slow = slow or changed
        voice.catch_up()
        for view, lane in zip(self.views, voice.lanes, strict=False):
            view.voice.sample(lane, now, voice.wpm, slow)
        if not slow:
            return
        live = self.runner.live
        if race is not None and live.finished and not self.runner.running:
            if self._verdict_for is not race:
                self._verdict_for = race
                names = [view.lane.tier.name for view in self.views]
                end = max((lane.ended_at or 0.0 for lane in live.lanes), default=0.0)
                self.voice_line.update(verdict_line(names, voice.verdicts(), voice.rates_until(end)))
        else:
            self._verdict_for = None
            spoken = self.views[self.speaker.lane].lane.tier.name if self.speaker is not None else None
            self.voice_line.update(voice_status(voice.wpm, voice.settings.tts_delay_s, spoken), layout=False)

    def _voice_stalls(self, index: int, now: float) -> list[SegmentSpan]:
        """The timeline's overlay: the voice's silences on a lane, while the lens is on."""
        if not self.voice.on or index >= len(self.voice.lanes):
            return []
        return self.voice.lanes[index].stall_spans(now)

    def _show_voice(self, on: bool) -> None:
        for view in self.views:
            view.show_voice(on)
        self.voice_line.display = on
        self._verdict_for = None
        self.refresh_bindings()

    def _rebind(self, live: LiveRace) -> None:
        self._live = live
        self._peak = 0.0
        self._summarised = None
        for view, lane in zip(self.views, live.lanes, strict=True):
            view.bind(lane)
        self.timeline.bind(live.lanes)
        self.summary.update("")

    def _scale(self, now: float) -> float:
        """One tok/s scale for every gauge: the highest rate seen this race, rounded up (never shrinks)."""
        for lane in self._live.lanes:
            self._peak = max(self._peak, gauge_peak(lane, now))
        return nice_scale(self._peak)

    def _set_focused(self, index: int) -> None:
        self.focused_lane = index
        for view in self.views:
            view.set_class(view.index == index, "-focused")

    # -- actions --------------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS:
            return self.replay is not None
        if action in RACE_ACTIONS:
            return self.replay is None
        if action == "focus_lane":
            return bool(parameters) and isinstance(parameters[0], int) and parameters[0] < len(self.views)
        if action == "stop":
            return True if self.runner.running else None
        if action in VOICE_ACTIONS:
            return self.voice.on
        if action in WHAT_IF_ACTIONS:
            return self.bottlenecks_shown
        return True

    def action_race(self) -> None:
        """Race again; a race still running is stopped first."""
        self.run_worker(self._restart(None), group="race", exclusive=True, exit_on_error=False)

    def action_restart(self) -> None:
        """Start the replay over, at the speed chosen."""
        self.run_worker(self._restart(None), group="race", exclusive=True, exit_on_error=False)

    async def _restart(self, prompt: str | None) -> None:
        if self.speaker is not None:  # the last race's sentences still queued are not this race's
            await self.speaker.aclose()
        await self.runner.restart(prompt)
        self.sample(force=True)

    def action_stop(self) -> None:
        self.run_worker(self.runner.stop(), group="race", exclusive=True, exit_on_error=False)

    def action_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle()
            self.sample(force=True)

    def action_step(self) -> None:
        if self.replay is not None:
            self.replay.step()
            self.sample(force=True)

    def action_faster(self) -> None:
        if self.replay is not None:
            self.replay.faster()
            self.sample(force=True)

    def action_slower(self) -> None:
        if self.replay is not None:
            self.replay.slower()
            self.sample(force=True)

    def action_focus_lane(self, index: int) -> None:
        if 0 <= index < len(self.views):
            self._set_focused(index)
            self.views[index].focus_body()

    def action_details(self) -> None:
        index = self.focused_lane
        race = self.runner.race
        # The lane's own list, not a copy: opened mid-race, the details refresh with what arrives after.
        events = race.lanes[index].events if race is not None else []
        from .details import DetailsScreen
        self.app.push_screen(DetailsScreen(index, self._live.lanes[index], events))

    def action_zoom(self) -> None:
        self.timeline.cycle_zoom()

    @property
    def bottlenecks_shown(self) -> bool:
        """Whether the bottleneck view is shown in place of the lanes."""
        return self.bottlenecks is not None and self.bottlenecks.display

    def action_bottlenecks(self) -> None:
        """The bottleneck view in place of the lanes, or back to the lanes."""
        if self.bottlenecks is None:
            from ..widgets.bottleneck import BottleneckView

            self.bottlenecks = BottleneckView(id="bottlenecks")
            self.mount(self.bottlenecks, before=self.timeline)
        shown = not self.bottlenecks.display
        self.bottlenecks.display = shown
        self.query_one("#lanes").display = not shown
        self.refresh_bindings()
        self.sample(force=True)

    def action_what_if_faster(self) -> None:
        if self.bottlenecks is not None:
            self.bottlenecks.step(1)
            self.sample(force=True)

    def action_what_if_slower(self) -> None:
        if self.bottlenecks is not None:
            self.bottlenecks.step(-1)
            self.sample(force=True)

    def action_voice(self) -> None:
        """The voice lens on or off, on every lane at once (so the tiers can be compared)."""
        self._show_voice(self.voice.toggle())
        self.sample(force=True)

    def action_voice_faster(self) -> None:
        self._change_wpm(WPM_STEP)

    def action_voice_slower(self) -> None:
        self._change_wpm(-WPM_STEP)

    def _change_wpm(self, step: float) -> None:
        if self.voice.on:
            self.voice.change_wpm(step, self.runner.now())
            self._verdict_for = None
            self.sample(force=True)

    def action_edit_prompt(self) -> None:
        self.query_one("#prompt", Input).focus()

    def action_leave_prompt(self) -> None:
        """Leave the prompt bar; what was typed and not raced is dropped, so the bar shows what races."""
        self._restore_prompt()
        self.set_focus(None)

    def on_input_blurred(self, event: Input.Blurred) -> None:
        if event.input.id == "prompt" and event.value.strip() != self._submitted:
            self._restore_prompt()

    def _restore_prompt(self) -> None:
        """The prompt bar back to the prompt the next race uses (Enter is the only way to change it)."""
        prompt = self.query_one("#prompt", Input)
        raced = self.runner.request.prompt
        if prompt.value != raced:
            prompt.value = raced
            prompt.cursor_position = len(raced)

    def action_help(self) -> None:
        from .help import HelpScreen
        self.app.push_screen(HelpScreen(self.key_help()))

    def action_export(self) -> None:
        """Pick a format and write the race beside its recording (a replay: beside the file replayed)."""
        from .export import ExportScreen, recording_of

        found = recording_of(self.runner, self.replay)
        if isinstance(found, str):
            self.notify(found, title="Nothing to export", severity="warning", markup=False)
            return
        self.app.push_screen(ExportScreen(found))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            self.notify("type a prompt first", severity="warning")
            return
        self._submitted = prompt
        self.set_focus(None)
        self.run_worker(self._restart(prompt), group="race", exclusive=True, exit_on_error=False)

    # -- what help and the command palette list ----------------------------------------------------------------------

    def key_help(self) -> list[tuple[str, str]]:
        """(keys, what they do) for every binding this screen offers now."""
        out = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            action, _, params = binding.action.partition("(")
            allowed = action in VOICE_ACTIONS | WHAT_IF_ACTIONS or self.check_action(action.removeprefix("app."),
                                                                                       (0,) if params else ())
            if not binding.show or allowed is False:
                continue
            out.append((binding.key_display or binding.key, binding.tooltip or binding.description))
        return out

    def commands(self) -> Iterator[tuple[str, str, Callable[[], object]]]:
        """(title, help, callback) for the command palette."""
        replay = self.replay is not None
        if replay:
            yield "Restart the replay", "play the recording again from its start", self.action_restart
        else:
            yield "Race again", "race the prompt again on every tier", self.action_race
        yield "Stop", "stop every lane still running", self.action_stop
        if replay:
            yield "Pause or play", "pause the replay, or play it on", self.action_pause
            yield "Step", "pause and move a tenth of a second, or to the next event", self.action_step
            yield "Faster", "play faster", self.action_faster
            yield "Slower", "play slower", self.action_slower
        else:
            yield "Edit the prompt", "change the prompt and race again", self.action_edit_prompt
        for view in self.views:
            name = literal(view.lane.tier.name)
            yield (f"Details: {name}", f"every metric of {name}, its definition and its source",
                   functools.partial(self.show_details, view.index))
        yield "Zoom the timeline", "cycle ×1, ×2, ×4, ×8 from the start of the race", self.action_zoom
        yield ("Bottlenecks", "where each lane's time goes: model, tools, people, waits; the Amdahl bound; what a "
               "faster model would do", self.action_bottlenecks)
        if self.bottlenecks_shown:
            yield "What if: a faster model", "raise N in \"a model N× faster\"", self.action_what_if_faster
            yield "What if: a slower model", "lower N in \"a model N× faster\"", self.action_what_if_slower
        yield ("Voice lens on or off", "where a speaking voice would be in every lane's answer, and when it "
               "would fall silent", self.action_voice)
        if self.voice.on:
            yield "Speak faster", "the voice lens speaks 15 words per minute faster", self.action_voice_faster
            yield "Speak slower", "the voice lens speaks 15 words per minute slower", self.action_voice_slower
        yield ("Export…", "write this race beside its recording: Markdown, HTML, CSV, SVG, asciicast or "
               "OpenTelemetry JSON", self.action_export)
        yield "Help", "keys, colours and where the numbers come from", self.action_help

    def show_details(self, index: int) -> None:
        """The details of lane ``index``, focused."""
        self._set_focused(index)
        self.action_details()


def literal(text: str) -> str:
    """``text`` as Textual markup that shows it as it is (the command palette reads its titles as markup)."""
    return text.replace("[", "\\[")
