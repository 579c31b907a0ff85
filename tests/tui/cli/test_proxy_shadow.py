"""``tokrace proxy --shadow TIER``: each agent's call sent again to the tier, measured and recorded on a lane of its
own, raced beside the agent's; it says it costs money, and the tier's key never reaches the recording."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx
import pytest
from proxying import Upstream1, anthropic_sse, sse_response
from serving import fast_source, serve_in_thread
from test_proxy_cmd import AGENT

from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.events import Done, Extra, Request
from tokrace.providers.proxy import Routes, Upstream
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.proxy.shadow import Shadow
from tokrace.providers.recording import read_recording
from tokrace.tui.cli.proxy import shadow_for
from tokrace.tui.main import main

KEY = "sk-ant-shadow-canary-0123456789"


def shadow_config(tmp_path: Path, url: str, provider: str = "anthropic") -> Path:
    config = tmp_path / "tokrace.toml"
    config.write_text(f'[[tiers]]\nname = "Fast shadow"\nprovider = "{provider}"\nmodel = "shadow-model"\n'
                      f'base_url = "{url}"\napi_key_env = "TOKRACE_SHADOW_TEST_KEY"\n')
    return config


def test_a_shadow_tier_races_every_call_on_its_own_lane_between_two_serve_instances(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_SHADOW_TEST_KEY", KEY)
    path = tmp_path / "shadowed.jsonl"
    with serve_in_thread(fast_source(ttft_ms=40)) as agent_side, serve_in_thread(fast_source(ttft_ms=5)) as shadow:
        code = main(["proxy", "--port", "0", "--upstream", agent_side.url, "--record", str(path), "--config",
                     str(shadow_config(tmp_path, shadow.url)), "--shadow", "Fast shadow", "--headless",
                     "--", sys.executable, "-c", AGENT])
    out, err = capsys.readouterr()
    assert code == 3, err
    assert "--shadow Fast shadow: every model call is sent a second time" in err and "costs money" in err
    rec = read_recording(path)
    lanes = {key: events for key, events in rec.events.items()}
    opened = {key: next(e for e in events if isinstance(e, Extra)).data for key, events in lanes.items()}
    shadows = [key for key, data in opened.items() if data.get("shadow") == "shadow Fast shadow"]
    agents = [key for key, data in opened.items() if "shadow" not in data]
    assert len(shadows) == 1 and len(agents) == 1
    asked = [e.model for e in lanes[shadows[0]] if isinstance(e, Request)]
    assert asked == ["shadow-model", "shadow-model"]  # the tier's model in place of the agent's
    assert [e.model for e in lanes[agents[0]] if isinstance(e, Request)] == ["m", "m"]
    ttfts = []
    for key in (agents[0], shadows[0]):
        events = lanes[key]
        assert sum(isinstance(e, Done) for e in events) == 2
        req = next(e for e in events if isinstance(e, Request))
        first = next(e for e in events if e.kind == "delta")
        ttfts.append(first.t - req.t)
    assert ttfts[1] < ttfts[0]  # measured with the same stamps: the faster server's first token came sooner
    text = path.read_text()
    assert KEY not in text and "canary" not in text
    assert KEY not in out + err


async def test_a_shadow_sends_the_tiers_key_and_model_never_the_clients_and_the_agent_sees_its_own_answer(
        tmp_path: Path) -> None:
    answers = [sse_response(anthropic_sse("end_turn", text="shadowed"))]

    def answer(request: bytes) -> list[bytes]:
        return answers[0]

    with serve_in_thread(fast_source()) as agent_side:
        async with Upstream1(answer) as copy_side:
            shadow = Shadow("T", Upstream.parse(copy_side.url, "T", (("x-api-key", KEY),)), "anthropic", "tm")
            session = ProxySession(Routes.single(Upstream.parse(agent_side.url)), tmp_path / "s.jsonl",
                                   shadow=shadow)
            await session.start()
            try:
                body = {"model": "m", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
                async with httpx.AsyncClient(base_url=session.server.url, timeout=10) as client:
                    got = await client.post("/v1/messages", json=body, headers={"x-api-key": "sk-ant-client-0123456789",
                                                                                "anthropic-version": "2023-06-01"})
                for _ in range(100):
                    if copy_side.requests:
                        break
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.05)
            finally:
                await session.close()
    assert got.status_code == 200 and b"shadowed" not in got.content
    (sent,) = copy_side.requests
    head, _, payload = sent.partition(b"\r\n\r\n")
    lowered = head.lower()
    assert KEY.encode().lower() in lowered and b"sk-ant-client" not in lowered and b"anthropic-version" in lowered
    assert json.loads(payload)["model"] == "tm"
    assert KEY not in (tmp_path / "s.jsonl").read_text()


def test_a_shadow_must_be_a_tier_that_takes_an_agents_calls(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_SHADOW_TEST_KEY", KEY)
    with pytest.raises(ConfigError, match="--shadow 'nope': not a configured tier"):
        shadow_for("nope", shadow_config(tmp_path, "http://127.0.0.1:9"))
    with pytest.raises(ConfigError, match="a synthetic tier cannot take an agent's calls"):
        shadow_for("Sol ultrafast", None)
    found = shadow_for("Fast shadow", shadow_config(tmp_path, "http://127.0.0.1:9/v1", "openai"))
    assert found is not None and found.protocol == "openai" and found.model == "shadow-model"
    assert found.copy("/v1/messages", "anthropic", found_head(), b"{}") == (
        "shadow Fast shadow speaks openai; a anthropic call is not shadowed")


def found_head() -> object:
    from tokrace.providers.proxy.http1 import parse_head

    return parse_head(b"POST /v1/messages HTTP/1.1\r\n\r\n")
