"""The traces scripts/bench_traces.py generates are traces tokrace reads whole: the benchmark measures real work,
not lines skipped."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from paths import ROOT

from tokrace.providers.traces.read import read_file


def load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_traces", ROOT / "scripts" / "bench_traces.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_every_generated_trace_is_read_with_nothing_skipped(tmp_path: Path) -> None:
    bench = load_bench()
    bench.generate(tmp_path, 8, 200_000)
    for path in sorted(tmp_path.iterdir()):
        found = read_file(path)
        assert found.problem is None and found.traces, path
        assert [t.skipped for t in found.traces] == [0] * len(found.traces), (path, found.traces[0].notes)


def test_rounds_alternate_which_run_goes_first_and_the_median_judges() -> None:
    bench = load_bench()
    assert bench.round_orders(3, 2) == [(1, 2), (2, 1), (1, 2)]
    assert bench.round_orders(4, 4) == [(1, 4), (4, 1), (1, 4), (4, 1)]
    assert bench.spread([1.59, 1.96, 1.81]) == (1.81, 1.59, 1.96)
