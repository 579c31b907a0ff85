"""``tokrace proxy``: an agent started after ``--`` goes through the proxy, and the session's report follows."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from serving import fast_source, serve_in_thread

from tokrace.providers.model.errors import ConfigError
from tokrace.providers.recording import read_recording
from tokrace.tui.cli.proxy import agent_command, agent_env, is_loopback, routes_for, setup_lines
from tokrace.tui.main import main

AGENT = """
import json, os, httpx
base = os.environ["ANTHROPIC_BASE_URL"]
body = {"model": "m", "stream": True, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
for _ in range(2):
    with httpx.stream("POST", base + "/v1/messages", json=body, headers={"x-api-key": "sk-ant-canary-0123456789"}) as r:
        r.read()
assert os.environ["OPENAI_BASE_URL"] == base + "/v1"
raise SystemExit(3)
"""


def test_the_agent_runs_through_the_proxy_and_the_session_report_follows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "session.jsonl"
    with serve_in_thread(fast_source()) as server:
        code = main(["proxy", "--port", "0", "--upstream", server.url, "--record", str(path), "--on", "Sol ultrafast",
                     "--", sys.executable, "-c", AGENT])
    out, err = capsys.readouterr()
    assert code == 3  # the agent's own exit code
    assert "recorded 2 call(s)" in err and err.count("session 1 lane 1 m: 200") == 2
    assert "Sol ultrafast would have" in out
    rec = read_recording(path)
    assert sum(e.kind == "request" for e in rec.events[(0, 0)]) == 2
    assert "canary" not in path.read_text() + out + err


def test_no_record_leaves_no_file_and_still_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with serve_in_thread(fast_source()) as server:
        code = main(["proxy", "--port", "0", "--upstream", server.url, "--no-record", "--", sys.executable, "-c",
                     AGENT.replace("raise SystemExit(3)", "")])
    out, _ = capsys.readouterr()
    assert code == 0 and "where the time went" in out
    assert list(tmp_path.iterdir()) == []


def test_set_up_lines_name_every_agent_and_codex_gets_a_responses_provider() -> None:
    lines = "\n".join(setup_lines("http://127.0.0.1:8787"))
    for agent in ("Claude Code", "Codex", "aider", "opencode", "SDKs"):
        assert agent in lines
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:8787 " in lines and 'wire_api="responses"' in lines
    command = agent_command(["/usr/bin/codex", "exec", "hi"], "http://h:1")
    assert command[:3] == ["/usr/bin/codex", "-c", "model_provider=tokrace"] and command[-2:] == ["exec", "hi"]
    assert 'base_url="http://h:1/v1"' in command[4] and "supports_websockets=false" in command[4]
    assert agent_command(["claude", "-p", "x"], "http://h:1") == ["claude", "-p", "x"]
    env = agent_env("http://h:1")
    assert env["ANTHROPIC_BASE_URL"] == "http://h:1" and env["OPENAI_BASE_URL"] == "http://h:1/v1"


def test_upstreams_and_addresses() -> None:
    assert routes_for(None, None).anthropic.host == "api.anthropic.com"
    assert routes_for("openai", None).anthropic.host == "api.openai.com"
    assert routes_for("http://127.0.0.1:8000/v1", None).openai.target("/v1/responses") == "/v1/responses"
    with pytest.raises(ConfigError, match="not anthropic, openai, a URL or a configured tier"):
        routes_for("nope", None)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")


def test_another_address_warns_and_a_bad_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["proxy", "--port", "99999"]) == 2
    assert capsys.readouterr().err == "tokrace: --port 99999: expected 0 to 65535\n"
    code = main(["proxy", "--host", "0.0.0.0", "--port", "0", "--no-record", "--", sys.executable, "-c", "pass"])
    err = capsys.readouterr().err
    assert code == 0 and "warning: listening on 0.0.0.0, not loopback" in err
    assert "no model call went through the proxy" in err


def test_an_upstream_tier_sends_its_own_key_in_place_of_the_clients(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "tokrace.toml"
    config.write_text('[[tiers]]\nname = "mine"\nprovider = "anthropic"\nmodel = "m"\n'
                      'base_url = "http://127.0.0.1:9"\napi_key_env = "TOKRACE_PROXY_TEST_KEY"\n')
    monkeypatch.delenv("TOKRACE_PROXY_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="TOKRACE_PROXY_TEST_KEY is not set"):
        routes_for("mine", config)
    monkeypatch.setenv("TOKRACE_PROXY_TEST_KEY", "sk-ant-tier-key-0123456789")
    upstream = routes_for("mine", config).anthropic
    assert upstream.public() == "http://127.0.0.1:9" and upstream.auth == (("x-api-key", "sk-ant-tier-key-0123456789"),)


def test_the_live_screen_shows_only_on_a_terminal_without_headless_or_an_agent_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from argparse import Namespace

    from tokrace.tui.cli.proxy import live_screen

    screen = object()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert live_screen(Namespace(headless=False), [], screen)  # type: ignore[arg-type]
    assert not live_screen(Namespace(headless=True), [], screen)  # type: ignore[arg-type]
    assert not live_screen(Namespace(headless=False), ["claude"], screen)  # type: ignore[arg-type]  (its terminal)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert not live_screen(Namespace(headless=False), [], screen)  # type: ignore[arg-type]


class WatchingScreen:
    """The screen seam as the live proxy uses it: sends one call through the proxy, then quits as q does."""

    def __init__(self, upstream_url: str) -> None:
        self.seen: list[str] = []
        self.said: list[str] = []
        self.upstream_url = upstream_url

    async def watch_proxy(self, live: object, now: object, heading: str, hint: str, follow: object, *,
                          theme: str | None = None) -> int:
        import asyncio

        import httpx

        from tokrace.providers.proxy.live import LiveProxy

        assert isinstance(live, LiveProxy)
        url = heading.rsplit(" ", 1)[1]
        body = {"model": "m", "stream": True, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(timeout=10) as client:
            await client.post(url + "/v1/messages", json=body, headers={"x-api-key": "sk-ant-canary-0123456789"})
        task = asyncio.ensure_future(follow(self.said.append))  # type: ignore[operator]
        for _ in range(100):
            await asyncio.sleep(0.02)
            if self.said and live.verdicts(now()):  # type: ignore[operator]
                break
        task.cancel()
        self.seen = [lane.answer_text() for lane in live.lanes]
        self.verdicts = [v.sentence() for v in live.verdicts(now())]  # type: ignore[operator]
        return 0


def test_on_a_terminal_the_proxy_runs_under_the_live_screen_and_reports_when_it_closes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tokrace.tui.cli.parser import build_parser
    from tokrace.tui.cli.proxy import cmd_proxy

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    path = tmp_path / "live.jsonl"
    with serve_in_thread(fast_source()) as server:
        screen = WatchingScreen(server.url)
        args = build_parser().parse_args(["proxy", "--port", "0", "--upstream", server.url, "--record", str(path),
                                          "--on", "Sol ultrafast"])
        code = cmd_proxy(args, screen)  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert code == 0 and screen.said and screen.said[0].startswith("session 1 lane 1 m: 200")
    assert screen.seen and screen.verdicts[0].startswith("on Sol ultrafast this session would be at ")
    assert "Sol ultrafast would have" in out and "recorded 1 call(s)" in err
    assert "canary" not in out + err + path.read_text()
