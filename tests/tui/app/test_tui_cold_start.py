"""What ``tokrace demo`` imports before its first frame: the screen it shows, nothing else (issue 29's cold start;
the time itself is measured by scripts/bench_cold_start.py). A fresh process runs the command's own start path, on
a headless screen, and lists its modules the moment the race starts, right after the first frame."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from paths import ROOT

NOT_BEFORE_THE_FIRST_FRAME = (
    "httpx", "tiktoken", "markdown_it", "rich.markdown",  # the HTTP tiers, token counting, a final answer's Markdown
    "tokrace.providers.adapters.http", "tokrace.providers.export", "tokrace.providers.proxy",
    "tokrace.providers.serve", "tokrace.providers.traces", "tokrace.providers.loop",
    "tokrace.tui.cli.proxy", "tokrace.tui.cli.traces", "tokrace.tui.cli.traces_common", "tokrace.tui.cli.serve",
    "tokrace.tui.cli.web", "tokrace.tui.cli.export", "tokrace.tui.cli.calibrate", "tokrace.tui.web",
    "tokrace.tui.app.screens.details", "tokrace.tui.app.screens.help", "tokrace.tui.app.screens.podium",
    "tokrace.providers.metrics.loop", "tokrace.providers.race.summary", "tokrace.tui.app.widgets.bottleneck",
    "tokrace.providers.runs.replay_control", "tokrace.providers.timing.playback", "tokrace.providers.voice.speak",
    "tokrace.tui.cli.export_files", "tokrace.tui.cli.traces_compare", "hashlib",  # the bottleneck view (b), a race's
    # end, a replay, --speak, bench's and replay's options, an o200k cache check
)
"""What the demo's first frame does without: other commands, other screens, the engines behind them."""

AT_THE_FIRST_FRAME = frozenset(f"tokrace.{name}" for line in (
    "providers providers.adapters providers.adapters.base providers.adapters.registry providers.config",
    "providers.config.demo providers.config.load providers.config.validate providers.metrics",
    "providers.metrics.gaps providers.metrics.text_count providers.metrics.turn providers.model",
    "providers.model.errors providers.model.eventlog providers.model.events providers.model.files",
    "providers.model.kinds providers.model.masking providers.model.messages providers.model.presets",
    "providers.model.printable providers.model.tiers providers.model.tokens providers.model.units providers.race",
    "providers.race.live providers.race.race providers.race.rate providers.race.text providers.race.turns",
    "providers.recording providers.recording.format providers.recording.paths providers.recording.reader",
    "providers.recording.writer providers.runs providers.runs.heap providers.runs.record_paths",
    "providers.runs.runner providers.timing providers.timing.clock providers.voice providers.voice.lens",
    "providers.voice.live themes themes.loader themes.plain tui tui.app tui.app.app tui.app.launch tui.app.render",
    "tui.app.render.compositor tui.app.render.direct_lines tui.app.render.internals tui.app.screens",
    "tui.app.screens.race tui.app.screens.race_keys tui.app.theming tui.app.widgets",
    "tui.app.widgets.big_digits tui.app.widgets.footer tui.app.widgets.frame_static tui.app.widgets.gauge",
    "tui.app.widgets.lane tui.app.widgets.palette tui.app.widgets.printable tui.app.widgets.prompt",
    "tui.app.widgets.replay_bar tui.app.widgets.summary tui.app.widgets.tail tui.app.widgets.timeline",
    "tui.app.widgets.voice tui.cli tui.cli.listing tui.cli.main tui.cli.parser tui.cli.race tui.cli.screen",
    "tui.cli.settings tui.cli.signals tui.cli.tables tui.main",
) for name in line.split())
"""Every one of tokrace's modules the demo's first frame may load (84): a module added to the start path fails the
test below until it is named here, or loaded after the first frame (see docs/performance.md, "Cold start")."""

SCRIPT = """
import json, sys
import textual.app
import tokrace.tui.cli.race as race
from tokrace.tui.app.screens.race import RaceScreen

race._on_screen = lambda: True  # as on a terminal
run = textual.app.App.run
textual.app.App.run = lambda app, **kw: run(app, headless=True, size=(80, 24))

def first_race(screen):
    json.dump(sorted(sys.modules), open(sys.argv[1], "w"))
    screen.app.exit()

RaceScreen._start = first_race
from tokrace.tui.main import main
sys.exit(main(["demo", "--no-record"]))
"""


def modules_at_the_first_frame(tmp_path: Path) -> list[str]:
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"),
                                            "XDG_DATA_HOME": str(tmp_path / "d")})
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_the_demo_imports_nothing_its_first_frame_does_without(tmp_path: Path) -> None:
    loaded = modules_at_the_first_frame(tmp_path)
    assert "tokrace.tui.app.screens.race" in loaded  # (the screen did start)
    early = [m for m in loaded if any(m == name or m.startswith(f"{name}.") for name in NOT_BEFORE_THE_FIRST_FRAME)]
    assert early == []


def test_the_demos_first_frame_loads_only_the_modules_named_for_it(tmp_path: Path) -> None:
    loaded = {m for m in modules_at_the_first_frame(tmp_path) if m.startswith("tokrace.")}
    assert sorted(loaded - AT_THE_FIRST_FRAME) == []
