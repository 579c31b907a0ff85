"""``tokrace web``: the tabs' command, the checks before serving, the guards of the server, and the race screen
in a real browser (Debian's chromium, headless)."""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from browser import Browser, missing_browser, tokrace_web

from tokrace.tui import main as cli
from tokrace.tui.cli import web as web_cmd
from tokrace.tui.cli.web import allowed_hosts, is_loopback, screen_command, tab_arguments
from tokrace.tui.web.server import refusal

FAST = """[defaults]
prompt = "Why does the bottleneck move?"
max_tokens = 60

[[tiers]]
name = "Quick lane"
provider = "synthetic"
model = "quick-1"
ttft_ms = 50
tok_s = 400
seed = 1

[[tiers]]
name = "Slow lane"
provider = "synthetic"
model = "slow-1"
ttft_ms = 100
tok_s = 150
seed = 2
"""
"""Two synthetic tiers that finish in half a second: the quick one always first."""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Catch what ``tokrace web`` would serve instead of serving it."""
    seen: dict[str, Any] = {}

    def serve(args: argparse.Namespace, check: Callable[[Sequence[str]], None]) -> int:
        tokrace_args = tab_arguments(args.tokrace_args)
        check(tokrace_args)
        seen.update(args=args, tokrace_args=tokrace_args, command=screen_command(tokrace_args))
        return 0

    monkeypatch.setattr(web_cmd, "serve_web", serve)
    return seen


def test_every_argument_web_does_not_take_goes_to_the_tabs(served: dict[str, Any], write_config: Callable[..., Path],
                                                           in_tmp: Path) -> None:
    path = write_config(FAST)
    assert cli.main(["web", "--config", str(path), "--port", "9000", "--tiers", "Quick lane", "--theme",
                     "projector", "--no-record"]) == 0
    assert served["args"].port == 9000 and served["args"].host == "127.0.0.1"
    assert served["tokrace_args"] == ["--config", str(path), "--tiers", "Quick lane", "--theme", "projector",
                                      "--no-record"]


def test_replay_and_demo_are_served_with_their_options(served: dict[str, Any], in_tmp: Path) -> None:
    from tui_harness import record_demo

    recording = asyncio.run(record_demo(in_tmp / "run.jsonl"))
    assert cli.main(["web", "replay", str(recording), "--speed", "2"]) == 0
    assert served["tokrace_args"] == ["replay", str(recording), "--speed", "2"]
    assert cli.main(["web", "--", "demo", "--tiers", "Sol ultrafast"]) == 0
    assert served["tokrace_args"] == ["demo", "--tiers", "Sol ultrafast"]


def test_the_tabs_run_this_python_and_this_tokrace_with_every_word_quoted() -> None:
    args = ["--prompt", "it's $(touch pwned) `touch pwned`; touch pwned", "--config", "my dir/x.toml"]
    assert shlex.split(screen_command(args)) == ["exec", sys.executable, "-P", "-m", "tokrace.tui.main", *args]


def test_a_hostile_argument_reaches_tokrace_as_text_through_the_shell(tmp_path: Path) -> None:
    args = ["--prompt", "$(touch pwned1) `touch pwned2`; touch pwned3 &", "--no-such-option"]
    done = subprocess.run(screen_command(args), shell=True, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "unrecognized arguments: --no-such-option" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["web", "bench"], "`tokrace bench` has no race screen to serve"),
    (["web", "--record", "x.jsonl"], "every browser tab would write the same file"),
    (["web", "--theme", "nope"], "no theme named 'nope'"),
    (["web", "--config", "missing.toml"], "missing.toml"),
    (["web", "replay", "missing.jsonl"], "missing.jsonl"),
    (["web", "replay", "x.jsonl", "--headless"], "have no screen to serve"),
])
def test_arguments_that_cannot_open_the_screen_fail_before_serving(argv: list[str], message: str, in_tmp: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (in_tmp / "x.jsonl").write_text("", encoding="utf-8")
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_unknown_option_is_named_and_said_to_be_the_tabs(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["web", "--port", "9000", "--bogus"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus" in err and "goes to the tokrace each tab runs" in err


def test_a_tokrace_option_before_web_is_said_to_go_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--theme", "projector", "web"])
    assert exit_.value.code == 2
    assert "--theme before `web`: put the tabs' options after it (tokrace web --theme ...)" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_a_bad_port_is_bad_usage(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["web", "--port", port])
    assert exit_.value.code == 2 and "argument --port" in capsys.readouterr().err


def test_a_public_url_must_be_an_http_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["web", "--public-url", "example.org"])
    assert "expected an http:// or https:// address" in capsys.readouterr().err


def test_a_port_in_use_is_one_clear_line(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["web", "--port", str(port)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"tokrace: port {port} on 127.0.0.1 is in use" in err and "--port" in err
    assert "Traceback" not in err


def test_an_address_not_of_this_machine_is_one_clear_line(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["web", "--host", "192.0.2.1", "--port", "0"]) == cli.EXIT_USAGE
    assert "not an address of this machine" in capsys.readouterr().err


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("127.0.0.2", True), ("0.0.0.0", False), ("192.168.1.4", False),
                                                ("tokrace.example", False)])
def test_only_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_on_loopback_a_request_must_name_a_loopback_host() -> None:
    hosts = allowed_hosts(None)
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"):
        assert refusal(host, None, hosts=hosts, public_url=None) is None
    problem = refusal("rebound.example:8000", None, hosts=hosts, public_url=None)
    assert problem is not None and "'rebound.example:8000'" in problem


def test_a_request_from_another_sites_page_is_refused() -> None:
    hosts = allowed_hosts(None)
    assert refusal("127.0.0.1:8000", "http://127.0.0.1:8000", hosts=hosts, public_url=None) is None
    assert refusal("127.0.0.1:8000", "http://evil.example", hosts=hosts, public_url=None) is not None
    assert refusal("127.0.0.1:8000", "http://127.0.0.1:9999", hosts=hosts, public_url=None) is not None
    assert refusal("127.0.0.1:8000", "null", hosts=hosts, public_url=None) is not None
    assert refusal("0.0.0.0:8000", "http://evil.example", hosts=None, public_url=None) is not None


def test_behind_a_proxy_the_public_address_is_allowed() -> None:
    url = "https://race.example.org/tokrace"
    hosts = allowed_hosts(url)
    assert refusal("race.example.org", "https://race.example.org", hosts=hosts, public_url=url) is None
    assert refusal("127.0.0.1:8000", "https://race.example.org", hosts=hosts, public_url=url) is None
    assert refusal("127.0.0.1:8000", "https://other.example.org", hosts=hosts, public_url=url) is not None


def test_the_screen_opens_where_textual_serve_names_a_driver(monkeypatch: pytest.MonkeyPatch, in_tmp: Path) -> None:
    from tokrace.tui.app import launch

    opened: list[str] = []
    monkeypatch.setattr(launch, "run_race", lambda *a, **k: opened.append("race") or 0)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert cli.main(["demo", "--no-record"]) == 0
    assert opened == ["race"]


def test_the_server_guards_its_page_and_serves_it_whole_from_the_address_used(in_tmp: Path) -> None:
    async def requests(url: str) -> tuple[int, str, int, int]:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/") as page:
                status, html = page.status, await page.text()
            async with session.get(f"{url}/", headers={"Host": "rebound.example"}) as rebound:
                rebound_status = rebound.status
            try:
                async with session.ws_connect(f"{url}/ws", origin="http://evil.example"):
                    hijack_status = 101
            except aiohttp.WSServerHandshakeError as exc:
                hijack_status = exc.status
        return status, html, rebound_status, hijack_status

    with tokrace_web(["demo", "--no-record"], cwd=in_tmp) as web:
        url = web.url
        status, html, rebound, hijack = asyncio.run(requests(url))
    assert status == 200 and f'data-session-websocket-url="ws://{url.removeprefix("http://")}/ws"' in html
    assert (rebound, hijack) == (403, 403)
    assert "fonts.googleapis.com" not in html and f"{url}/static/fonts/RobotoMono-VariableFont_wght.ttf" in html


def test_a_tab_beyond_max_tabs_is_turned_away_until_one_closes(in_tmp: Path) -> None:
    async def tabs(url: str) -> tuple[int, int]:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"{url}/ws"):
                try:
                    async with session.ws_connect(f"{url}/ws"):
                        turned_away = 101
                except aiohttp.WSServerHandshakeError as exc:
                    turned_away = exc.status
            for _ in range(100):  # the first tab's handler ends once its tokrace has quit
                try:
                    async with session.ws_connect(f"{url}/ws"):
                        return turned_away, 101
                except aiohttp.WSServerHandshakeError as exc:
                    await asyncio.sleep(0.1)
                    later = exc.status
        return turned_away, later

    with tokrace_web(["--max-tabs", "1", "demo", "--no-record"], cwd=in_tmp) as web:
        assert asyncio.run(tabs(web.url)) == (503, 101)


def test_listening_beyond_loopback_warns_there_is_no_authentication(in_tmp: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", "web", "--host", "0.0.0.0", "--port", "0",
                           "--public-url", "http://example.org", "demo", "--bogus-option"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=in_tmp)
    assert done.returncode == 2  # the tabs' arguments are checked before listening: no warning for nothing
    assert "no authentication" not in done.stderr
    with tokrace_web(["--host", "0.0.0.0", "demo", "--no-record"], cwd=in_tmp, logs=in_tmp / "logs"):
        warning = (in_tmp / "logs" / "stderr").read_text()
    assert "warning: listening on 0.0.0.0" in warning and "no authentication" in warning


@pytest.mark.skipif(missing_browser() is not None, reason=f"no browser to test in: {missing_browser()}")
def test_the_race_screen_in_a_real_browser(write_config: Callable[..., Path], in_tmp: Path) -> None:
    config = write_config(FAST)
    with tokrace_web(["--config", str(config), "--no-record"], cwd=in_tmp) as web, Browser(web.url) as browser:
        screen = browser.wait_for_race_end()
        assert "Quick lane" in screen and "Slow lane" in screen
        assert re.search(r"Quick lane finished first in \d+\.\d\d s, \d+\.\d\d s ahead of Slow lane", screen)
        browser.press("b")
        bottlenecks = browser.wait_for("where the time goes", timeout=30)
        assert "Quick lane" in bottlenecks
        shot = browser.screenshot(in_tmp / "web.png")
        tabs = web.tabs()
        assert len(tabs) == 1
    assert web.process.returncode == 0  # Ctrl-C stopped it, in time
    ended = time.monotonic() + 10  # a tab's tokrace ends its race and writes its last lines before it exits
    while any(Path(f"/proc/{pid}").exists() for pid in tabs) and time.monotonic() < ended:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in tabs)  # and ended the tab's tokrace
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.skipif(missing_browser() is not None, reason=f"no browser to test in: {missing_browser()}")
def test_each_tab_replays_the_recording_on_its_own(in_tmp: Path) -> None:
    from tui_harness import record_demo

    recording = asyncio.run(record_demo(in_tmp / "run.jsonl"))
    with tokrace_web(["replay", str(recording), "--speed", "4", "--theme", "tokrace-light"], cwd=in_tmp) as web, \
            Browser(web.url, (1000, 600)) as first, Browser(web.url, (1000, 600)) as second:
        for tab in (first, second):
            screen = tab.wait_for_race_end()
            assert "run.jsonl" in screen and "Sol ultrafast finished first" in screen
        second.press("b")
        assert "where the time goes" in second.wait_for("where the time goes")
        assert "where the time goes" not in first.screen()  # one tab's key is not another's
        assert len(web.tabs()) == 2
        first.close()  # closing a tab ends its tokrace
        deadline = time.monotonic() + 15
        while len(web.tabs()) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(web.tabs()) == 1


def test_the_server_logs_no_line_per_request_unless_verbose(in_tmp: Path) -> None:
    """In front of a room the server's terminal stays quiet: no access-log line per page, script or font."""
    async def fetch(url: str) -> None:
        async with aiohttp.ClientSession() as session:
            for path in ("/", "/", "/static/js/textual.js"):
                async with session.get(f"{url}{path}") as answer:
                    assert answer.status == 200
                    await answer.read()

    for verbose, logs in ((False, in_tmp / "quiet"), (True, in_tmp / "verbose")):
        with tokrace_web([*(["--verbose"] if verbose else []), "demo", "--no-record"], cwd=in_tmp, logs=logs) as web:
            asyncio.run(fetch(web.url))
        said = (logs / "stderr").read_text() + (logs / "stdout").read_text()
        assert ("GET /static/js/textual.js" in said) is verbose, said


@pytest.mark.skipif(missing_browser() is not None, reason=f"no browser to test in: {missing_browser()}")
def test_keys_work_before_the_page_is_clicked(in_tmp: Path) -> None:
    """The page focuses the terminal when it loads: a key typed at once reaches the race screen."""
    with tokrace_web(["demo", "--no-record"], cwd=in_tmp) as web, Browser(web.url) as browser:
        browser.wait_for("Sol ultrafast")
        deadline = time.monotonic() + 30
        while "where the time goes" not in browser.screen():
            assert time.monotonic() < deadline, browser.screen()
            browser.press("b", focus=False)  # nothing clicked, nothing focused by the test
            time.sleep(0.5)
