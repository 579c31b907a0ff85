"""``tokrace --version`` answers before the command line is imported: nothing heavy on its path (issue 29's cold
start; the time itself is measured by scripts/bench_cold_start.py)."""

from __future__ import annotations

import subprocess
import sys

from paths import ROOT

from tokrace.providers import __version__

HEAVY = ("tokrace.tui.cli", "tokrace.tui.app", "textual", "rich", "httpx", "tiktoken", "argparse")


def test_version_imports_nothing_heavy() -> None:
    code = ("import sys; from tokrace.tui.main import main; code = main(['--version']); "
            f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=60)
    version, loaded = out.stdout.splitlines()
    assert version == f"tokrace {__version__}"
    assert loaded == "[]"
