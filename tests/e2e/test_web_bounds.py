"""``tokrace web`` bounded, with real processes: a tab asking for a 100,000 × 100,000 terminal gets 500 × 200, and
its tokrace ends within a second of its WebSocket closing, even when it would not quit (killed)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import aiohttp
from browser import tokrace_web

from tokrace.tui.web.server import end_tab


def children(pid: int) -> list[int]:
    """The running processes whose parent is ``pid`` (from /proc; one that ended, a zombie not yet reaped, is not
    running: it holds no memory and takes no time)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            state, parent = stat.rsplit(")", 1)[1].split()[:2]
            if int(parent) == pid and state != "Z":
                found.append(int(entry))
    return found


def environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def test_a_huge_terminal_is_clamped_and_the_tab_ends_within_a_second_of_its_websocket_closing(in_tmp: Path) -> None:
    async def tab(url: str, server_pid: int) -> tuple[dict[str, str], float]:
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(f"{url}/ws?width=100000&height=100000")
            await ws.receive(timeout=20)  # the tab's tokrace is running
            tabs = children(server_pid)
            assert len(tabs) == 1
            env = environment(tabs[0])
            await ws.send_json(["resize", {"width": 100_000, "height": 100_000}])
            await ws.close()
            closed = time.monotonic()
            while tabs[0] in children(server_pid) and time.monotonic() - closed < 5:
                await asyncio.sleep(0.02)
            return env, time.monotonic() - closed

    with tokrace_web(["demo", "--no-record"], cwd=in_tmp) as web:
        env, took = asyncio.run(tab(web.url, web.process.pid))
    assert (env["COLUMNS"], env["ROWS"]) == ("500", "200")
    assert took < 1.0


class StuckService:
    """An app service whose tokrace never answers ``quit`` (busy drawing): ``stop`` waits for the process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def stop(self) -> None:
        await self._process.wait()


async def test_a_tab_that_does_not_quit_is_killed_within_a_second() -> None:
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    started = time.monotonic()
    await end_tab(StuckService(process), wait_s=0.5)  # type: ignore[arg-type]
    assert process.returncode is not None and time.monotonic() - started < 1.0
