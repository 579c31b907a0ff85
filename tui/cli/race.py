"""The race commands: ``tokrace`` and ``demo`` (on the screen, or bench's table when piped), ``bench`` and
``replay``, and the check ``tokrace web`` runs on the arguments its tabs will get."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tokrace.providers.model.files import read_regular_text
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec

from .parser import UsageError, build_parser, parse_command_line
from .screen import Screen

if TYPE_CHECKING:
    from tokrace.providers.config.load import Config
    from tokrace.providers.loop.scenario import Scenario
    from tokrace.providers.runs.record_paths import RecordPlan
    from tokrace.providers.voice.lens import VoiceSettings
    from tokrace.providers.voice.speak import Speaker


def _voice(args: argparse.Namespace) -> VoiceSettings | None:
    if not (args.voice or args.wpm is not None or args.tts_delay is not None):
        return None
    from tokrace.providers.voice.lens import DEFAULT_TTS_DELAY_S, DEFAULT_WPM, VoiceSettings

    delay = args.tts_delay / 1000.0 if args.tts_delay is not None else DEFAULT_TTS_DELAY_S
    return VoiceSettings(wpm=args.wpm if args.wpm is not None else DEFAULT_WPM, tts_delay_s=delay)


def _speaker(args: argparse.Namespace, tiers: Sequence[TierSpec]) -> Speaker | None:
    """The --speak listener, checked before the race: the command must exist and the lane must be a tier."""
    if args.speak is None:
        if args.speak_lane is not None:
            raise UsageError("--speak-lane needs --speak CMD (the text-to-speech command)")
        return None
    import shlex
    import shutil

    from tokrace.providers.voice.speak import Speaker

    try:
        argv = shlex.split(args.speak)
    except ValueError as exc:
        raise UsageError(f"--speak: cannot read the command {args.speak!r} ({exc})") from None
    if not argv:
        raise UsageError("--speak: the text-to-speech command is empty")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"--speak: no command {argv[0]!r} found; install a text-to-speech program "
                         "(espeak-ng, say, piper) or name one that is installed")
    lane = 0
    if args.speak_lane is not None:
        names = [t.name.lower() for t in tiers]
        if args.speak_lane.lower() not in names:
            raise UsageError(f"--speak-lane: no tier named {args.speak_lane!r} in this race "
                             f"(tiers: {', '.join(t.name for t in tiers)})")
        lane = names.index(args.speak_lane.lower())
    return Speaker(argv, lane)


def _record_plan(args: argparse.Namespace) -> RecordPlan | None:
    """Where the screen records its races: ``None`` with ``--no-record``."""
    from tokrace.providers.runs.record_paths import RecordPlan

    return None if getattr(args, "no_record", False) else RecordPlan(getattr(args, "record", None))


def _request(args: argparse.Namespace, defaults_prompt: str, defaults_max: int) -> TurnRequest:
    prompt = defaults_prompt
    if getattr(args, "prompt", None):
        prompt = args.prompt
    elif getattr(args, "prompt_file", None):
        try:
            prompt = read_regular_text(args.prompt_file).strip()
        except OSError as exc:
            raise UsageError(f"{args.prompt_file}: cannot read the prompt ({exc.strerror})") from None
        if not prompt:
            raise UsageError(f"{args.prompt_file}: the prompt file is empty")
    return TurnRequest(prompt=prompt, max_tokens=getattr(args, "max_tokens", None) or defaults_max)


def _configured_race(args: argparse.Namespace) -> tuple[Config, list[TierSpec], Scenario | None, TurnRequest]:
    """The config, its tiers (``--tiers``), the scenario and the request that ``tokrace`` and ``bench`` race."""
    from tokrace.providers.config.load import exact_reads, load_config

    config = load_config(args.config)
    tiers = config.select(args.tiers)
    if getattr(args, "exact_reads", False):
        tiers = exact_reads(tiers)
    scenario = _scenario(args, config.defaults.scenario)
    request = _request(args, config.defaults.prompt, config.defaults.max_tokens)
    if args.max_tokens:  # the command line wins over every tier's own limit (in a loop: caps every request)
        tiers = [dataclasses.replace(tier, max_tokens=args.max_tokens if scenario else None) for tier in tiers]
    if scenario is not None:
        request.prompt = scenario.first_prompt()
    return config, tiers, scenario, request


def cmd_bench(args: argparse.Namespace, screen: Screen) -> int:
    from tokrace.providers.recording import default_path

    from .export_files import table_exports
    from .headless import run_headless
    from .load import check_load_args, run_load_headless

    plan = check_load_args(args)
    config, tiers, scenario, request = _configured_race(args)
    if plan is not None:
        return run_load_headless(tiers, request, plan, fast_forward=args.fast_forward, warm=args.warm,
                                 json_target=args.json_target, exports=table_exports(args), prompt=request.prompt,
                                 stall_threshold_s=config.defaults.stall_threshold_ms / 1000.0)
    voice, speaker = _voice(args), _speaker(args, tiers)
    slug = scenario.name if scenario is not None else request.prompt
    record = None if args.no_record else (args.record or default_path(slug, tiers=[t.name for t in tiers]))
    return run_headless(tiers, request, runs=args.runs, fast_forward=args.fast_forward, record=record,
                        prompt=request.prompt, json_target=args.json_target, warm=args.warm,
                        stall_threshold_s=config.defaults.stall_threshold_ms / 1000.0,
                        voice=voice, speaker=speaker, scenario=scenario, what_if=args.what_if,
                        exports=table_exports(args))


def _scenario(args: argparse.Namespace, default: str | None) -> Scenario | None:
    """The scenario to race: --scenario, else the config's (unless a prompt was given on the command line)."""
    prompted = bool(getattr(args, "prompt", None) or getattr(args, "prompt_file", None))
    if args.scenario and prompted:
        raise UsageError("--scenario and --prompt both say what to race; give one of them")
    name = args.scenario or (None if prompted else default)
    if not name:
        return None
    from tokrace.providers.loop.scenario_file import load_scenario

    return load_scenario(name)


def cmd_replay(args: argparse.Namespace, screen: Screen) -> int:
    if getattr(args, "on", None) is not None:
        from .traces_compare import replay_on

        return replay_on(args, lambda args, file, caption: _replay(args, file, screen, caption), screen.max_lanes)
    from tokrace.providers.recording import recordings_dir

    from .find_recording import find_recording
    from .traces import replayable

    args.file = find_recording(args.file, recordings_dir())
    # an agent trace (Claude Code, Codex, OTLP, WEKA) plays as a recording made from it; its idle cap is spent
    # cutting away time, so the replay itself runs uncapped
    with replayable(args.file, args.idle_cap) as (file, converted):
        if converted:
            args.idle_cap = None
        return _replay(args, file, screen)


def _replay(args: argparse.Namespace, file: Path, screen: Screen, caption: str | None = None) -> int:
    from tokrace.providers.adapters.replay import replay_pace, replay_tiers
    from tokrace.providers.recording import read_recording

    recording = read_recording(file)
    if args.run is not None and not 0 <= args.run < recording.runs:
        raise UsageError(f"{args.file}: no run {args.run} (it has {recording.runs})")
    if not args.headless and _on_screen():
        # The screen's playback clock applies the speed (the user changes it) and the idle cap; the lanes play the
        # recorded times, so every figure is the recording's.
        tiers = replay_tiers(recording, run=args.run)
        return screen.run_replay(recording, tiers, args.speed, args.idle_cap, args.run, theme=args.theme,
                          voice=_voice(args), speaker=_speaker(args, tiers), caption=caption,
                          podium=not args.no_podium, present=args.present)
    from .export_files import table_exports
    from .headless import run_headless

    runs = recording.runs if args.run is None else 1
    tiers = replay_tiers(recording, run=args.run)
    scenario = recording.header.get("scenario")
    if caption is not None and args.json_target != "-":
        print(caption)
    return run_headless(tiers, TurnRequest(prompt=recording.prompt), runs=runs, fast_forward=args.fast_forward,
                        record=None, prompt=recording.prompt, json_target=args.json_target,
                        voice=_voice(args), speaker=_speaker(args, tiers),
                        loop=str(scenario) if scenario else None,
                        pace=replay_pace(recording, args.speed, args.idle_cap, args.run),
                        paced=_paced_note(args.speed, args.idle_cap), exports=table_exports(args))


def _paced_note(speed: float, idle_cap: float | None) -> str | None:
    """What a headless replay says about its pacing: it waited less, and every figure is still the recording's."""
    parts = ([f"played ×{speed:g}"] if speed != 1.0 else []) + (
        [f"idle pauses over {idle_cap:g} s played in {idle_cap:g} s"] if idle_cap is not None else [])
    return f"replay {', '.join(parts)}: only the waiting changed, every figure is the recording's" if parts else None


RACE_KEYS = ("config", "tiers", "prompt", "prompt_file", "max_tokens", "scenario", "record", "no_record",
             "voice", "wpm", "tts_delay", "speak", "speak_lane", "warm", "exact_reads", "concurrency", "requests",
             "duration")
"""The options ``tokrace`` takes without a command (as ``bench`` does)."""


def cmd_race(args: argparse.Namespace, screen: Screen) -> int:
    """``tokrace`` alone: the race screen on the configured tiers (or the demo); piped, the bench table."""
    if not _on_screen():
        bench, _ = parse_command_line(["bench"])
        bench.__dict__.update({key: getattr(args, key) for key in RACE_KEYS if hasattr(args, key)})
        return cmd_bench(bench, screen)
    for key in RACE_KEYS:
        if not hasattr(args, key):
            setattr(args, key, None)
    from .load import check_load_args

    plan = check_load_args(args)
    config, tiers, scenario, request = _configured_race(args)
    if plan is not None:
        return screen.run_load(tiers, request, plan, theme=getattr(args, "theme", None),
                               configured_theme=config.defaults.theme, warm=bool(args.warm),
                               stall_threshold_s=config.defaults.stall_threshold_ms / 1000.0)
    return screen.run_race(tiers, request, scenario, theme=getattr(args, "theme", None),
                    configured_theme=config.defaults.theme, record=_record_plan(args), voice=_voice(args),
                    speaker=_speaker(args, tiers), warm=bool(args.warm), podium=not getattr(args, "no_podium", False),
                    present=bool(getattr(args, "present", False)))


def cmd_demo(args: argparse.Namespace, screen: Screen) -> int:
    """The race on the built-in demo tiers: on screen in a terminal, else the bench table (recorded as bench's)."""
    from tokrace.providers.config.demo import DEMO_MAX_TOKENS, DEMO_PROMPT
    from tokrace.providers.config.load import Config

    tiers = Config(source=None).select(args.tiers)  # a config without a file races the demo tiers
    scenario = _scenario(args, None)
    request = _request(args, DEMO_PROMPT, DEMO_MAX_TOKENS)
    if scenario is not None:
        request.prompt = scenario.first_prompt()
    if not _on_screen():
        from tokrace.providers.recording import default_path

        from .headless import run_headless

        slug = scenario.name if scenario is not None else request.prompt
        record = None if args.no_record else (args.record or default_path(slug, tiers=[t.name for t in tiers]))
        return run_headless(tiers, request, runs=1, fast_forward=False, record=record, prompt=request.prompt,
                            json_target=None, scenario=scenario, voice=_voice(args), speaker=_speaker(args, tiers))
    return screen.run_race(tiers, request, scenario, theme=args.theme, record=_record_plan(args), voice=_voice(args),
                    speaker=_speaker(args, tiers), podium=not args.no_podium, present=args.present)


SCREEN_COMMANDS = (None, "demo", "replay")
"""The commands that open the race screen, and so the ones ``tokrace web`` serves."""


def check_screen_args(argv: Sequence[str], screen: Screen) -> None:
    """Raise a one-line error unless ``tokrace ARGV`` opens the race screen with everything it names loading:
    ``tokrace web`` checks its tabs' arguments once, before serving, rather than failing in every tab."""
    from tokrace.providers.adapters.replay import replay_tiers
    from tokrace.providers.recording import read_recording, recordings_dir

    from .find_recording import find_recording
    from .traces import replayable

    try:
        args = build_parser().parse_args(argv)  # argparse says what is wrong
    except SystemExit as exc:
        if exc.code:
            print("tokrace web: every argument but --host, --port, --max-tabs, --allow-host and --public-url goes "
                  "to the tokrace each tab runs (see tokrace --help)", file=sys.stderr)
        raise
    command = getattr(args, "command", None)
    if command not in SCREEN_COMMANDS:
        raise UsageError(f"`tokrace {command}` has no race screen to serve; tokrace web serves `tokrace`, "
                         "`tokrace demo` or `tokrace replay FILE`, with their options")
    if getattr(args, "record", None) is not None:
        raise UsageError("--record FILE: every browser tab would write the same file; leave it out (each race is "
                         "recorded to its own file in the recordings folder) or give --no-record")
    if getattr(args, "theme", None):
        screen.check_theme(args.theme)
    if command == "replay":
        if args.headless or args.json_target or args.fast_forward:
            raise UsageError("replay --headless, --json and --fast-forward have no screen to serve")
        args.file = find_recording(args.file, recordings_dir())
        with replayable(args.file, args.idle_cap) as (file, _):  # a recording, or an agent trace made into one
            recording = read_recording(file)
        if args.run is not None and not 0 <= args.run < recording.runs:
            raise UsageError(f"{args.file}: no run {args.run} (it has {recording.runs})")
        tiers = replay_tiers(recording, run=args.run)
    elif command == "demo":
        from tokrace.providers.config.load import Config

        tiers = Config(source=None).select(args.tiers)
        _scenario(args, None)
        _request(args, "", 1)
    else:
        for key in RACE_KEYS:
            if not hasattr(args, key):
                setattr(args, key, None)
        _, tiers, _, _ = _configured_race(args)
    screen.check_lanes(tiers)
    _speaker(args, tiers)


def _on_screen() -> bool:
    """Whether a screen is there to draw on: a terminal, or a Textual driver named in ``TEXTUAL_DRIVER`` (as
    textual-serve does for each browser tab of ``tokrace web``, whose output is a pipe to the browser)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))
