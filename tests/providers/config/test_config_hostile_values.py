"""Config values that cannot be right are refused at load: a base_url with a query string or a fragment (the
request path would go after it), a name or model holding control characters, a FIFO given as the config."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tokrace.providers.adapters.http import OpenAIChatProvider
from tokrace.providers.config.load import load_config
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.tiers import TierSpec

WriteConfig = Callable[[str], Path]


def tier(extra: str) -> str:
    return f'[[tiers]]\nname = "x"\nprovider = "openai"\nmodel = "m"\n{extra}\n'


def load_error(write_config: WriteConfig, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text)).select(None)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("url", "what"), [
    ("https://h.example/v1?api-version=2024&access_token=abcdefgh123", "a query string"),
    ("https://h.example/v1#frag", "a fragment"),
    ("https://h.example/v1?", "a query string"),
])
def test_a_base_url_with_a_query_or_fragment_is_refused_at_load_with_the_reason(
        write_config: WriteConfig, url: str, what: str) -> None:
    message = load_error(write_config, tier(f'base_url = "{url}"'))
    assert f"base_url carries {what}" in message and "query table" in message
    assert "abcdefgh123" not in message  # the secret parameter is masked in the message


def test_query_parameters_go_in_the_query_table_and_reach_the_request(write_config: WriteConfig) -> None:
    cfg = load_config(write_config(tier('base_url = "https://h.example/v1"\nquery = { api-version = "2024-10" }')))
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n')

    provider = OpenAIChatProvider(cfg.select(None)[0], transport=httpx.MockTransport(handler))
    assert provider.request_url() == "https://h.example/v1/chat/completions?api-version=2024-10"


@pytest.mark.parametrize("key", ["name", "model"])
def test_a_name_or_model_holding_a_control_character_is_refused(write_config: WriteConfig, key: str) -> None:
    text = ('[[tiers]]\nname = "x"\nprovider = "synthetic"\nmodel = "m"\n'.replace(
        f'{key} = "{"x" if key == "name" else "m"}"', f'{key} = "a\\u001b]0;owned\\u0007"'))
    message = load_error(write_config, text)
    assert f"tiers[0].{key}" in message and "control character" in message and "\x1b" not in message


def test_a_query_value_must_be_text_or_a_number() -> None:
    with pytest.raises(ConfigError, match=r"query\.v must be text or a number"):
        OpenAIChatProvider(TierSpec("x", "openai", "m", base_url="https://h.example/v1", options={"query": {"v": []}}))


def test_a_fifo_given_as_the_config_is_one_clear_error_never_a_block(tmp_path: Path) -> None:
    fifo = tmp_path / "tokrace.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_config(fifo)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "loading a FIFO config blocked"
    assert str(outcome[0]) == f"{fifo}: cannot read the config (it is a FIFO (named pipe), not a regular file)"
