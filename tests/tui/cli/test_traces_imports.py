"""``tokrace traces --jobs N`` forks its workers from a parent that imported only what reading traces needs: what
the parent imports before the fork is serial time every run pays (docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from paths import ROOT
from paths import TRACE_FIXTURES as FIXTURES

NOT_FOR_TRACES = ("textual", "tokrace.providers.export.markdown", "tokrace.providers.race.summary",
                  "tokrace.tui.cli.rich_tables", "tokrace.tui.cli.proxy", "tokrace.providers.proxy",
                  "tokrace.tui.cli.serve", "tokrace.providers.serve", "httpx")
"""The screen, the race's exports (``--markdown`` imports them when asked), and the other commands' modules: the
proxy, the server and the HTTP client."""

PROBE = r"""
import json, sys
import tokrace.tui.cli.traces_common as common
seen = []
work = common._in_workers
def in_workers(*args, **kwargs):
    seen.append(sorted(sys.modules))
    return work(*args, **kwargs)
common._in_workers = in_workers
from tokrace.tui.main import main
code = main(["traces", *sys.argv[1:], "--jobs", "2", "--json", "-"])
print(json.dumps({"code": code, "modules": seen[0] if seen else None}), file=sys.stderr)
"""


def test_the_parent_imports_nothing_traces_do_not_use_before_its_workers_start() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(FIXTURES / "weka"), str(ROOT / "examples" / "traces")],
                          capture_output=True, text=True, check=False, timeout=120, cwd=ROOT)
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0 and probe["modules"] is not None, done.stderr[-2000:]
    loaded = [m for m in probe["modules"] if any(m == name or m.startswith(f"{name}.") for name in NOT_FOR_TRACES)]
    assert loaded == []
