"""The traces scripts/bench_traces.py generates are traces tokrace reads whole: the benchmark measures real work,
not lines skipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from paths import ROOT

from tokrace.providers.traces.read import read_file


def test_every_generated_trace_is_read_with_nothing_skipped(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_traces", ROOT / "scripts" / "bench_traces.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.generate(tmp_path, 8, 200_000)
    for path in sorted(tmp_path.iterdir()):
        found = read_file(path)
        assert found.problem is None and found.traces, path
        assert [t.skipped for t in found.traces] == [0] * len(found.traces), (path, found.traces[0].notes)
