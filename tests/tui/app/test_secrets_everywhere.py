"""Keys in the wrong place: one distinctive secret planted in every place a user could put one (the key variable,
a custom header, ``extra_body``, the ``query`` table), echoed back by a server in its text and its
error, and every output grepped for it: stdout, stderr, the recording, ``--json``, ``tokrace tiers`` and SVG
screenshots of the lane and its details."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tokrace.providers.config.load import parse_config
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.app.app import build_app
from tokrace.tui.app.screens.details import DetailsScreen
from tokrace.tui.app.screens.race import RaceScreen
from tokrace.tui.main import main

MARK = "PLANTED"
KEY = f"sk-tokrace-{MARK}-" + "4e1d" * 5
HEADER_VALUE = f"hdr-{MARK}-" + "91ab" * 4
BODY_VALUE = f"sk-body-{MARK}-" + "c0de" * 5
QUERY_VALUE = f"qry-{MARK}-" + "5a5a" * 4
BASIC = base64.b64encode(f"user:{KEY}".encode()).decode()
"""The Basic-auth form of the key, as httpx would send it for ``http://user:KEY@host``."""


class Echo(BaseHTTPRequestHandler):
    """Streams back everything the client sent that could hold a secret (or, on ``/fail``, says it in a 401)."""

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        said = (f"auth={self.headers.get('authorization')} token={self.headers.get('x-auth-token')} "
                f"user={body.get('user')} path={self.path} Authorization: Basic {BASIC}")
        if "/fail" in self.path:
            payload = json.dumps({"error": {"message": f"no: {said}", "type": "invalid_request_error"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        chunks = [{"choices": [{"index": 0, "delta": {"content": piece + " "}, "finish_reason": None}]}
                  for piece in said.split(" ")]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps({'id': 'c', 'object': 'chat.completion.chunk', **chunk})}\n\n"
                             .encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def config_text(url: str) -> str:
    return f"""
[[tiers]]
name = "echo"
provider = "openai"
model = "m"
base_url = "{url}/v1"
query = {{ api_key = "{QUERY_VALUE}", mode = "fast" }}
api_key_env = "TOKRACE_TEST_KEY_VAR"
headers = {{ X-Auth-Token = "{HEADER_VALUE}", X-Plain = "{HEADER_VALUE}" }}
extra_body = {{ user = "{BODY_VALUE}" }}
max_retries = 0

[[tiers]]
name = "refused"
provider = "openai"
model = "m"
base_url = "{url}/fail/v1"
query = {{ token = "{QUERY_VALUE}" }}
api_key_env = "TOKRACE_TEST_KEY_VAR"
headers = {{ X-Auth-Token = "{HEADER_VALUE}" }}
extra_body = {{ user = "{BODY_VALUE}" }}
max_retries = 0
"""


def leaks(text: str) -> list[str]:
    return [secret for secret in (MARK, BASIC, "4e1d4e1d", "91ab91ab", "c0dec0de", "5a5a5a5a") if secret in text]


def test_no_output_of_bench_or_tiers_holds_a_planted_secret(
        echo_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOKRACE_TEST_KEY_VAR", KEY)
    monkeypatch.setenv("COLUMNS", "250")  # the tables' URLs on one line
    config = tmp_path / "tokrace.toml"
    config.write_text(config_text(echo_server), encoding="utf-8")
    record, report = tmp_path / "r.jsonl", tmp_path / "r.json"
    code = main(["bench", "--config", str(config), "--record", str(record), "--json", str(report)])
    out, err = capsys.readouterr()
    assert code == 1  # the refused lane failed, as it should
    assert main(["tiers", "--config", str(config)]) == 0
    tiers_out, tiers_err = capsys.readouterr()
    assert main(["replay", str(record), "--headless", "--fast-forward"]) == 1  # the refused lane again
    replay_out, replay_err = capsys.readouterr()
    recording, json_text = record.read_text(encoding="utf-8"), report.read_text(encoding="utf-8")
    for name, text in (("stdout", out), ("stderr", err), ("recording", recording), ("--json", json_text),
                       ("tiers", tiers_out + tiers_err), ("replay", replay_out + replay_err)):
        assert leaks(text) == [], f"a secret leaked into {name}:\n{text}"
    # The answer and the error still say what happened, with the secrets masked in place.
    answer = "".join(json.loads(line).get("text", "") for line in recording.splitlines()[1:])
    assert "auth=Bearer [redacted]" in answer and "token=[redacted]" in answer and "user=[redacted]" in answer
    assert "Authorization: Basic" in answer and "[redacted]" in answer.split("Basic")[-1]
    assert "api_key=[redacted]&mode=fast" in recording  # the request's URL, as recorded
    assert "HTTP 401" in json.loads(json_text)["tiers"][1]["runs"][0]["error"]


async def test_no_screenshot_of_the_lane_or_its_details_holds_a_planted_secret(
        echo_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKRACE_TEST_KEY_VAR", KEY)
    config = parse_config(config_text(echo_server), tmp_path / "tokrace.toml")
    app = build_app(config.tiers, TurnRequest("Say hi.", max_tokens=40), animate=False, freeze_gc=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.runner.wait_started()
        await app.runner.wait_finished()
        screen = app.screen
        assert isinstance(screen, RaceScreen)
        screen.sample(force=True)
        await pilot.pause()
        lane_svg = app.export_screenshot()
        shots = [lane_svg]
        for lane in ("1", "2"):
            await pilot.press(lane, "d")
            assert isinstance(app.screen, DetailsScreen)
            await pilot.pause()
            shots.append(app.export_screenshot())
            await pilot.press("escape")
    assert "[redacted]" in lane_svg.replace("&#160;", " ")
    for shot in shots:
        assert leaks(shot) == []


@pytest.mark.parametrize("url", [f"http://user:{KEY}@127.0.0.1:1/v1", f"https://:{KEY}@api.example.com/v1"])
def test_a_key_in_the_userinfo_of_base_url_is_refused_at_load_pointing_at_api_key_env(tmp_path: Path,
                                                                                     url: str) -> None:
    text = f'[[tiers]]\nname = "x"\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, tmp_path / "tokrace.toml").select(None)  # raised when the tier is selected
    message = str(caught.value)
    assert "line 5" in message and "api_key_env" in message and leaks(message) == []


def test_userinfo_refusal_reaches_the_command_line_as_one_line_without_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tokrace.toml"
    config.write_text(f'[[tiers]]\nname = "x"\nprovider = "openai"\nbase_url = "http://u:{KEY}@h/v1"\n',
                      encoding="utf-8")
    assert main(["bench", "--config", str(config), "--no-record"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "api_key_env" in err and leaks(out + err) == []


def test_a_public_tier_masks_url_secrets_and_key_shaped_values() -> None:
    tier = TierSpec(name="t", provider="openai", base_url=f"https://h/v1?key={QUERY_VALUE}&x=1",
                    options={"extra_body": {"user": BODY_VALUE, "reasoning_format": "parsed"}})
    public = tier.public()
    assert public["base_url"] == "https://h/v1?key=[redacted]&x=1"
    assert public["extra_body"] == {"user": "[redacted]", "reasoning_format": "parsed"}


def test_a_key_given_where_a_table_belongs_is_not_echoed_by_the_config_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "tokrace.toml"
    config.write_text(f'[[tiers]]\nname = "x"\nprovider = "openai"\nheaders = "Bearer {KEY}"\n', encoding="utf-8")
    assert main(["tiers", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "line 4: tiers[0].headers: expected a table" in err and leaks(err) == []
