"""Numbers a user can type: non-finite or absurd values are refused at load with file, line and key; the JSON never
holds NaN or Infinity; max_tokens has a documented cap and schedules are generated as they are played."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import synthetic

from tokrace.providers.adapters.synthetic import Profile, schedule
from tokrace.providers.config.load import load_config
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import MAX_TOKENS_LIMIT
from tokrace.providers.runs.session import finite_json, run_session
from tokrace.tui.cli import headless
from tokrace.tui.main import build_parser, main

TIER = '[[tiers]]\nname = "t"\nprovider = "synthetic"\n'


@pytest.mark.parametrize(("text", "line", "key"), [
    (TIER + "ttft_ms = inf\n", 4, "tiers[0].ttft_ms"),
    (TIER + "ttft_ms = nan\n", 4, "tiers[0].ttft_ms"),
    (TIER + "ttft_ms = 1e300\n", 4, "tiers[0].ttft_ms"),
    (TIER + "tok_s = 1e-300\n", 4, "tiers[0].tok_s"),
    (TIER + "tok_s = -inf\n", 4, "tiers[0].tok_s"),
    (TIER + "thinking_tok_s = 1e300\n", 4, "tiers[0].thinking_tok_s"),
    (TIER + "price = { input = inf }\n", 4, "tiers[0].price.input"),
    (TIER + "max_tokens = 1000000000\n", 4, "tiers[0].max_tokens"),
    ("[defaults]\nmax_tokens = 1000000000\n", 2, "defaults.max_tokens"),
    ("[defaults]\nstall_threshold_ms = nan\n", 2, "defaults.stall_threshold_ms"),
    ('[[tiers]]\nname = "h"\nprovider = "openai"\nread_timeout_s = inf\n', 4, "tiers[0].read_timeout_s"),
    ('[[tiers]]\nname = "h"\nprovider = "openai"\nturn_timeout_s = 1e300\n', 4, "tiers[0].turn_timeout_s"),
    ('[[tiers]]\nname = "r"\nprovider = "replay"\nfile = "x.jsonl"\nspeed = 1e-300\n', 5, "tiers[0].speed"),
])
def test_a_non_finite_or_absurd_number_is_refused_with_file_line_and_key(
        write_config: Callable[[str], Path], text: str, line: int, key: str) -> None:
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path).select(None)  # a tier's error is raised when it is selected (all are, here)
    assert str(caught.value).startswith(f"{path}, line {line}: {key}: ")


@pytest.mark.parametrize("args", [["--max-tokens", "1000000000"], ["--runs", "100000000"]])
def test_the_command_line_caps_max_tokens_and_runs(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["bench", "--fast-forward", "--no-record", *args])
    assert caught.value.code == 2
    assert "expected at most" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["inf", "nan", "1e300"])
def test_a_non_finite_option_is_bad_usage(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["bench", "--fast-forward", "--no-record", "--what-if", value])
    assert caught.value.code == 2 and "expected a number up to" in capsys.readouterr().err


def test_a_schedule_is_generated_as_it_is_played() -> None:
    tracemalloc.start()
    try:
        steps = schedule(Profile(tok_s=750), MAX_TOKENS_LIMIT)
        first = [next(steps) for _ in range(10)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [s.tokens for s in first] == [1] * 10
    assert peak < 200_000, f"{peak} bytes for the first ten steps"


def test_the_cap_itself_is_accepted() -> None:
    args = build_parser().parse_args(["bench", "--max-tokens", str(MAX_TOKENS_LIMIT)])
    assert args.max_tokens == MAX_TOKENS_LIMIT


def test_the_json_writes_null_for_a_number_that_is_not_finite(capsys: pytest.CaptureFixture[str]) -> None:
    tiers = [synthetic("a", tok_s=100)]
    result = asyncio.run(run_session(tiers, TurnRequest("Why?", max_tokens=5), fast_forward=True))
    metrics = result.metrics[0][0]
    result.metrics[0][0] = dataclasses.replace(metrics, decode_tok_s=float("inf"), ttft_s=float("nan"))
    headless.write_json(result, "-")
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out
    run = json.loads(out)["tiers"][0]["runs"][0]
    assert run["decode_tok_s"] is None and run["ttft_s"] is None and run["e2e_s"] == metrics.e2e_s


def test_finite_json_keeps_every_finite_number() -> None:
    assert finite_json({"a": [1, 2.5, float("-inf")], "b": (0.0,), "c": "x"}) == {"a": [1, 2.5, None], "b": [0.0],
                                                                                "c": "x"}


def test_tokrace_serve_caps_what_a_client_asks_for() -> None:
    from tokrace.providers.serve.sources import max_tokens_of

    assert max_tokens_of({"max_tokens": 10**9}, 400) == MAX_TOKENS_LIMIT
    assert max_tokens_of({"max_completion_tokens": 50}, 400) == 50
