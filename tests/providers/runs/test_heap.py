"""glibc's mmap threshold is fixed at start-up, so that huge events' blocks go back to the system when freed; any
other C library, or a person's own setting, is left alone."""

from __future__ import annotations

import ctypes
import platform
import sys
from typing import Any

import pytest

from tokrace.providers.runs import heap


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"),
                    reason="glibc only")
def test_on_glibc_the_threshold_is_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(heap._ENV, raising=False)
    calls: list[tuple[int, int]] = []
    real = ctypes.CDLL

    class Spy:
        def __init__(self, name: Any) -> None:
            self._lib = real(name)
            self.gnu_get_libc_version = self._lib.gnu_get_libc_version

        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return int(self._lib.mallopt(param, value))

    monkeypatch.setattr(ctypes, "CDLL", Spy)
    assert heap.fix_mmap_threshold() is True
    assert calls == [(heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD), (heap.M_TRIM_THRESHOLD, heap.TRIM_THRESHOLD)]


_TRIMS = """
import ctypes, sys
from tokrace.providers.runs import heap
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "fixed":
    assert heap.fix_mmap_threshold()
else:  # the mmap threshold alone, as before
    assert libc.mallopt(heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD)
trims = 0
for _ in range(50):
    block = bytearray(256 * 1024)  # asyncio's read block: taken from the heap's top, freed at once
    held = libc.mallinfo2().arena
    del block
    trims += libc.mallinfo2().arena < held
print(trims)
"""


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
                         and hasattr(ctypes.CDLL(None), "mallinfo2")), reason="glibc 2.33 and up only")
def test_a_read_sized_block_freed_at_the_heaps_top_is_kept_for_the_next_read() -> None:
    import os
    import subprocess

    def trims(mode: str) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        done = subprocess.run([sys.executable, "-c", _TRIMS, mode], capture_output=True, text=True, env=env,
                              check=True)
        return int(done.stdout)

    assert trims("mmap only") >= 40  # the heap shrank after (nearly) every read: two brk calls each
    assert trims("fixed") == 0


def test_another_c_library_or_system_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(heap._ENV, raising=False)
    called: list[int] = []

    class Musl:
        def __init__(self, name: Any) -> None:
            pass

        def mallopt(self, param: int, value: int) -> int:  # musl's takes nothing and says so
            called.append(param)
            return 0

    monkeypatch.setattr(ctypes, "CDLL", Musl)
    assert heap.fix_mmap_threshold() is False and called == []
    monkeypatch.setattr(sys, "platform", "darwin")
    assert heap.fix_mmap_threshold() is False


def test_a_threshold_the_person_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(heap._ENV, "65536")

    def boom(name: Any) -> None:
        raise AssertionError("looked at the C library")

    monkeypatch.setattr(ctypes, "CDLL", boom)
    assert heap.fix_mmap_threshold() is False


def test_a_c_library_that_cannot_be_loaded_is_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(heap._ENV, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")

    def missing(name: Any) -> None:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert heap.fix_mmap_threshold() is False


def test_the_command_fixes_it_before_any_command_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokrace.tui import main as entry

    fixed: list[bool] = []
    monkeypatch.setattr(heap, "fix_mmap_threshold", lambda: fixed.append(True) or True)
    with pytest.raises(SystemExit):
        entry.main(["--help"])
    assert fixed == [True]
