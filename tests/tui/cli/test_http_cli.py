"""``tokrace bench`` against an OpenAI-compatible loopback server, and keys that never leave the process."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from serving import fast_source, serve_in_thread, stream_turn

from tokrace.providers.model.events import Error
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.main import main


def bench_json(config: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["bench", "--config", str(config), "--json", "-", *extra])
    return code, json.loads(capsys.readouterr().out)


def local_config(port: int, **tier: str) -> str:
    lines = "\n".join(f'{k} = "{v}"' for k, v in tier.items())
    return (f'[defaults]\nprompt = "Say hi."\nmax_tokens = 12\n\n[[tiers]]\nname = "local"\nprovider = "openai"\n'
            f'model = "local-model"\nbase_url = "http://127.0.0.1:{port}/v1"\n{lines}\n')


def test_bench_reports_usage_tokens_when_the_server_sends_usage(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    with serve_in_thread(fast_source()) as server:
        code, report = bench_json(write_config(local_config(server.port)), capsys, "--no-record")
    run = report["tiers"][0]["runs"][0]
    assert code == 0 and run["ok"] and run["tokens_source"] == "usage" and run["output_tokens"] == 12


def test_bench_counts_tokens_itself_when_the_server_sends_no_usage(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    with serve_in_thread(fast_source(), usage=False) as server:
        code, report = bench_json(write_config(local_config(server.port)), capsys, "--no-record")
    run = report["tiers"][0]["runs"][0]
    assert code == 0 and run["ok"] and run["tokens_source"] != "usage" and run["output_tokens"] > 0


def test_bench_json_has_the_providers_own_timing_the_tier_it_reported_and_the_retries(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    # Reported: --json lacked what the details view shows.
    with serve_in_thread(fast_source(), flavor="groq", report_tier="flex") as server:
        text = (local_config(server.port, service_tier="priority")
                + 'headers = { "x-tokrace-fault" = "http=429,retry_after=0.01,times=1" }\n')
        code, report = bench_json(write_config(text), capsys, "--no-record")
    run = report["tiers"][0]["runs"][0]
    assert code == 0 and run["ok"]
    assert run["retries"] == 1
    assert run["service_tier"] == {"asked": "priority", "got": "flex"}
    groq = run["provider_timing"]["groq"]
    assert groq["completion_tokens"] == 12 and groq["completion_time"] > 0 and "decode_tok_s" in groq


def test_bench_json_says_null_for_a_tier_nobody_asked_for_or_reported(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    code, report = bench_json(write_config('[defaults]\nmax_tokens = 5\n\n[[tiers]]\nname = "s"\n'
                                           'provider = "synthetic"\n'), capsys, "--no-record", "--fast-forward")
    run = report["tiers"][0]["runs"][0]
    assert code == 0
    assert (run["retries"], run["service_tier"], run["provider_timing"]) == (0, {"asked": None, "got": None}, {})


def test_bench_exits_1_with_the_error_in_json_when_a_lane_fails(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    with serve_in_thread(fast_source(), fault=None) as server:
        text = local_config(server.port) + 'headers = { "x-tokrace-fault" = "reset,after=2" }\n'
        code, report = bench_json(write_config(text), capsys, "--no-record")
    run = report["tiers"][0]["runs"][0]
    # The server aborts with an RST; now and then the client's socket reports it as an early end of the body
    # rather than ECONNRESET (about 1 run in 40 here). Either way the lane must fail, saying the stream was cut.
    assert code == 1 and not run["ok"]
    assert "reset mid-stream" in run["error"] or "closed the connection mid-stream" in run["error"]


def planted_key() -> str:
    return "sk-planted-" + secrets.token_hex(16)


def test_a_planted_key_reaches_no_recording_log_error_or_json(
        write_config: Callable[[str], Path], capsys: pytest.CaptureFixture[str], in_tmp: Path,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    key = planted_key()
    monkeypatch.setenv("TOKRACE_PLANTED_KEY", key)
    caplog.set_level(logging.DEBUG)
    with serve_in_thread(fast_source()) as server:
        text = local_config(server.port, api_key_env="TOKRACE_PLANTED_KEY")
        text += text.replace('name = "local"', 'name = "refused"').split("\n\n", 1)[1].replace(
            "[[tiers]]", '[[tiers]]\nheaders = { "x-tokrace-fault" = "http=401" }', 1)
        recording = in_tmp / "session.jsonl"
        code, report = bench_json(write_config(text), capsys, "--record", str(recording))
        tiers_out = main(["tiers", "--config", str(in_tmp / "tokrace.toml")])
    captured = capsys.readouterr()
    runs = [t["runs"][0] for t in report["tiers"]]
    assert code == 1 and runs[0]["ok"] and "HTTP 401" in runs[1]["error"] and tiers_out == 0
    for where, text_seen in (("recording", recording.read_text(encoding="utf-8")), ("json", json.dumps(report)),
                             ("stdout", captured.out), ("stderr", captured.err), ("log", caplog.text)):
        assert key not in text_seen, f"the key leaked into the {where}"
    assert "TOKRACE_PLANTED_KEY" in recording.read_text(encoding="utf-8")  # the variable's name is fine


async def test_a_key_echoed_back_by_a_server_is_redacted_from_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    key = planted_key()
    monkeypatch.setenv("TOKRACE_PLANTED_KEY", key)

    def echo(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"]
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {sent}"}})

    spec = TierSpec(name="x", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
                    api_key_env="TOKRACE_PLANTED_KEY")
    events = await stream_turn(spec, transport=httpx.MockTransport(echo))
    error = events[-1]
    assert isinstance(error, Error) and key not in error.message and "[redacted]" in error.message


async def test_a_planted_key_reaches_no_screenshot_of_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokrace.providers.adapters.http import OpenAIChatProvider
    from tokrace.providers.serve import ServeServer
    from tokrace.tui.app.app import build_app

    key = planted_key()
    monkeypatch.setenv("TOKRACE_PLANTED_KEY", key)

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"bad key {request.headers['authorization']}"}})

    async with ServeServer(fast_source()) as server:
        tiers = [TierSpec(name=name, provider="openai", model="m", base_url=f"{server.url}/v1",
                          api_key_env="TOKRACE_PLANTED_KEY") for name in ("served", "echoing")]

        def make(spec: TierSpec) -> OpenAIChatProvider:
            mock = httpx.MockTransport(echo) if spec.name == "echoing" else None
            return OpenAIChatProvider(spec, transport=mock)

        app = build_app(tiers, TurnRequest("Say hi.", max_tokens=8), provider_factory=make, animate=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await app.runner.wait_started()
            await app.runner.wait_finished()
            app.screen.sample(force=True)  # type: ignore[attr-defined]
            await pilot.pause()
            svg = app.export_screenshot()
    lanes = app.runner.race.lanes if app.runner.race is not None else []
    assert [lane.ok for lane in lanes] == [True, False]
    assert key not in svg
