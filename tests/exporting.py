"""Helpers for the export tests: recordings of short races and loops made on virtual time, and what
``tokrace replay --headless --json`` says of them (the numbers every export must repeat)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokrace.providers.config.demo import demo_tiers
from tokrace.providers.export.race_data import ExportSource, replay_recording
from tokrace.providers.loop.scenario_file import load_scenario
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder, read_recording
from tokrace.providers.runs.session import run_session
from tokrace.tui.main import main


def record(path: Path, tiers: Sequence[TierSpec] | None = None, *, max_tokens: int = 40, runs: int = 1,
           scenario: str | None = None, prompt: str = "Why is the bottleneck moving?") -> Path:
    """Race the tiers (the demo's by default) on virtual time, recorded to ``path`` as ``tokrace bench`` does."""
    lanes = list(tiers) if tiers is not None else demo_tiers()
    loop = load_scenario(scenario) if scenario is not None else None
    if loop is not None:
        prompt = loop.first_prompt()
    recorder = Recorder(path, prompt, lanes, scenario=scenario)

    def on_start(run: int) -> None:
        recorder.run = run

    asyncio.run(run_session(lanes, TurnRequest(prompt, max_tokens), runs=runs, fast_forward=True,
                            listeners=[recorder], on_run_start=on_start, scenario=loop))
    recorder.close()
    return path


def failing_tiers() -> list[TierSpec]:
    """The demo with its priority lane failing part-way."""
    tiers = demo_tiers()
    tiers[1].options["fail_after_tokens"] = 12
    return tiers


def source_of(path: Path, run: int | None = None) -> ExportSource:
    """What an export reads from a recording."""
    return asyncio.run(replay_recording(read_recording(path), run))


def replay_json(path: Path, tmp: Path, *extra: str) -> dict[str, Any]:
    """``tokrace replay FILE --headless --fast-forward --json`` of a recording."""
    out = tmp / f"{path.stem}-replay.json"
    assert main(["replay", str(path), "--headless", "--fast-forward", "--json", str(out), *extra]) in (0, 1)
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data
