"""``tokrace traces --jobs N``: files read and analysed in N worker processes, the output byte for byte what one
process writes (tables, JSON, the comparison), in the files' order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from paths import ROOT
from paths import TRACE_FIXTURES as FIXTURES
from rich.console import Console

from tokrace.providers.traces.read import Found, files
from tokrace.tui.cli.traces_common import BATCH_BYTES, BATCH_FILES, batches, read_each, start_order
from tokrace.tui.main import main

EXAMPLES = ROOT / "examples" / "traces"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("extra", [["--json", "-"], [], ["--on", "Sol ultrafast,Sol priority", "--json", "-"],
                                   ["--on", "Sol ultrafast"]], ids=["json", "tables", "on-json", "on-tables"])
def test_two_jobs_write_what_one_job_writes(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    one = run(capsys, "traces", str(EXAMPLES), str(FIXTURES), "--jobs", "1", *extra)
    two = run(capsys, "traces", str(EXAMPLES), str(FIXTURES), "--jobs", "2", *extra)
    assert one[0] == 0 and one[1]
    assert two == one


def test_jobs_read_in_other_processes_and_report_in_order() -> None:
    paths = sorted(files([EXAMPLES, FIXTURES]))

    def where(found: Found) -> tuple[Path, int]:
        return found.path, os.getpid()

    got = list(read_each(paths, None, Console(), "reading", where, jobs=2))
    assert [path for path, _ in got] == paths
    assert {pid for _, pid in got} - {os.getpid()}  # read by workers, not by this process
    assert list(read_each(paths, None, Console(), "reading", where, jobs=1)) == [(p, os.getpid()) for p in paths]


def test_bad_jobs_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("0", "-2", "two", "100000"):
        with pytest.raises(SystemExit) as exc:
            main(["traces", str(EXAMPLES), "--jobs", value])
        assert exc.value.code == 2
    assert "--jobs" in capsys.readouterr().err


def test_files_big_enough_to_hold_the_others_up_start_first_largest_first() -> None:
    assert start_order([100] * 6, jobs=2) == list(range(6))  # even sizes: their own order
    sizes = [10] * 100 + [500, 0, 2000]  # two big files at the end would leave a worker reading alone
    assert start_order(sizes, jobs=2)[:3] == [102, 100, 0]
    assert sorted(start_order(sizes, jobs=2)) == list(range(103))


def test_a_big_last_file_is_reported_in_its_own_turn(tmp_path: Path) -> None:
    small = sorted(files([EXAMPLES]))[:6]
    big = tmp_path / "zz-big.jsonl"
    big.write_bytes(b"".join(p.read_bytes() for p in small) * 20)
    paths = [*small, big]
    assert start_order([p.stat().st_size for p in paths], jobs=2)[0] == len(paths) - 1

    def name(found: Found) -> str:
        return found.path.name

    assert list(read_each(paths, None, Console(), "reading", name, jobs=2)) == [p.name for p in paths]


def test_small_files_go_to_a_worker_in_runs_that_shrink_to_single_files_at_the_end() -> None:
    sizes = [1000] * 1000
    runs = batches(list(range(1000)), sizes, jobs=2)
    assert [i for run in runs for i in run] == list(range(1000))  # every file once, in order
    assert len(runs[0]) == BATCH_FILES and all(len(run) == 1 for run in runs[-8:])
    assert max(map(len, batches(list(range(200)), [BATCH_BYTES // 3] * 200, jobs=2))) == 3  # bytes bound a run too
    big = [10] * 100 + [5000]
    assert batches(start_order(big, 2), big, 2)[0] == [100]  # a big file alone


def test_a_failure_in_a_worker_is_raised_in_its_files_turn() -> None:
    paths = sorted(files([EXAMPLES, FIXTURES]))
    bad = paths[5]
    seen: list[Path] = []

    def digest(found: Found) -> Path:
        if found.path == bad:
            raise ValueError("broken digest")
        return found.path

    with pytest.raises(ValueError, match="broken digest"):
        seen.extend(read_each(paths, None, Console(), "reading", digest, jobs=2))
    assert seen == paths[:5]
