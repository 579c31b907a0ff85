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
)
"""What the demo's first frame does without: other commands, other screens, the engines behind them."""

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
