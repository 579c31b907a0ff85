"""Turning read pacing off: a tier's ``exact_reads``, ``[defaults] exact_reads`` and ``--exact-reads`` on the
commands that race HTTP lanes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokrace.providers.adapters import create_provider
from tokrace.providers.adapters.http import HTTPProvider
from tokrace.providers.config.load import exact_reads, parse_config
from tokrace.providers.model.tiers import TierSpec
from tokrace.tui.main import main

CONFIG = """\
[defaults]
{defaults}

[[tiers]]
name = "chat"
provider = "openai"
model = "m"
base_url = "http://127.0.0.1:9/v1"

[[tiers]]
name = "claude"
provider = "anthropic"
model = "m"
base_url = "http://127.0.0.1:9"
exact_reads = false

[[tiers]]
name = "synthetic"
provider = "synthetic"
"""


def options(tiers: list[TierSpec]) -> dict[str, Any]:
    return {t.name: t.options.get("exact_reads") for t in tiers}


def test_the_defaults_key_applies_to_http_tiers_that_do_not_say_otherwise() -> None:
    on = parse_config(CONFIG.format(defaults="exact_reads = true"), Path("t.toml"))
    assert options(on.tiers) == {"chat": True, "claude": False, "synthetic": None}
    off = parse_config(CONFIG.format(defaults=""), Path("t.toml"))
    assert options(off.tiers) == {"chat": None, "claude": False, "synthetic": None}
    assert options(exact_reads(off.tiers)) == {"chat": True, "claude": True, "synthetic": None}  # the flag wins


def test_a_bad_exact_reads_value_names_its_line() -> None:
    with pytest.raises(Exception, match=r"line 2: defaults.exact_reads: expected true or false"):
        parse_config("[defaults]\nexact_reads = 1\n", Path("t.toml"))
    broken = parse_config(CONFIG.format(defaults="").replace("exact_reads = false", 'exact_reads = "yes"'),
                          Path("t.toml"))
    assert "tiers[1].exact_reads: expected true or false" in str(broken.broken[0].error)


def test_the_provider_reads_every_packet_with_exact_reads() -> None:
    chat = TierSpec(name="c", provider="openai", model="m", base_url="http://127.0.0.1:9/v1")
    made, exact = create_provider(chat), create_provider(exact_reads([chat])[0])
    assert isinstance(made, HTTPProvider) and isinstance(exact, HTTPProvider)
    assert not made.exact_reads and exact.exact_reads


@pytest.mark.parametrize("argv", [["bench"], []])
def test_exact_reads_on_the_command_line_reaches_every_http_tier(
        argv: list[str], write_config: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch,
        in_tmp: Path) -> None:
    from tokrace.tui.cli import headless

    raced: list[list[TierSpec]] = []

    def run_headless(tiers: list[TierSpec], *args: Any, **kwargs: Any) -> int:
        raced.append(tiers)
        return 0

    monkeypatch.setattr(headless, "run_headless", run_headless)
    config = str(write_config(CONFIG.format(defaults="")))
    assert main([*argv, "--config", config, "--no-record"]) == 0  # (piped, `tokrace` alone is bench)
    assert main([*argv, "--config", config, "--no-record", "--exact-reads"]) == 0
    assert [options(tiers) for tiers in raced] == [{"chat": None, "claude": False, "synthetic": None},
                                                   {"chat": True, "claude": True, "synthetic": None}]
