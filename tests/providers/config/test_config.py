"""Configuration (docs/design.md §5): where it is found, what it holds, and errors that name file, line, key and
expectation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from paths import ROOT

from tokrace.providers.adapters import known_providers
from tokrace.providers.config.demo import DEMO_PROMPT, demo_tiers
from tokrace.providers.config.load import load_config, parse_config
from tokrace.providers.model.errors import ConfigError
from tokrace.providers.model.tiers import Price

WriteConfig = Callable[..., Path]

GOOD = """\
[defaults]
prompt = "Why is the sky blue?"
max_tokens = 300
stall_threshold_ms = 400

[[tiers]]
name = "Sol ultrafast"
provider = "synthetic"
model = "gpt-5.6-sol"
ttft_ms = 180
tok_s = 750
jitter = 0.15
seed = 7
price = { input = 5.0, output = 30.0, cached_input = 0.5 }

[[tiers]]
name = "Yesterday"
provider = "replay"
file = "session.jsonl"
lane = "Sol standard"
speed = 2
"""


def error_for(write_config: WriteConfig, text: str) -> str:
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path).select(None)  # a tier's error is raised when it is selected (all are, here)
    message = str(caught.value)
    assert message.startswith(f"{path}")
    assert "\n" not in message
    return message[len(str(path)):]


def test_a_good_config_gives_its_defaults_and_tiers(write_config: WriteConfig) -> None:
    config = load_config(write_config(GOOD))
    assert not config.is_demo
    assert (config.defaults.prompt, config.defaults.max_tokens, config.defaults.stall_threshold_ms) == (
        "Why is the sky blue?", 300, 400)
    fast, replay = config.tiers
    assert (fast.name, fast.provider, fast.model) == ("Sol ultrafast", "synthetic", "gpt-5.6-sol")
    assert fast.price == Price(input=5.0, output=30.0, cached_input=0.5)
    assert fast.options == {"ttft_ms": 180, "tok_s": 750, "jitter": 0.15, "seed": 7}
    assert replay.options == {"file": "session.jsonl", "lane": "Sol standard", "speed": 2}


@pytest.mark.usefixtures("in_tmp")
def test_without_any_config_the_offline_demo_is_used() -> None:
    config = load_config()
    assert config.is_demo
    assert config.defaults.prompt == DEMO_PROMPT
    assert [t.name for t in config.tiers] == [t.name for t in demo_tiers()]


def test_the_config_is_looked_up_on_the_command_line_then_here_then_in_the_user_dir(
        in_tmp: Path, isolated_user_dirs: Path) -> None:
    user = isolated_user_dirs / "config" / "tokrace" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[defaults]\nprompt = "user"\n', encoding="utf-8")
    assert load_config().defaults.prompt == "user"
    (in_tmp / "tokrace.toml").write_text('[defaults]\nprompt = "local"\n', encoding="utf-8")
    assert load_config().defaults.prompt == "local"
    explicit = in_tmp / "other.toml"
    explicit.write_text('[defaults]\nprompt = "explicit"\n', encoding="utf-8")
    assert load_config(explicit).defaults.prompt == "explicit"


def test_a_config_without_tiers_races_the_demo_tiers_with_its_defaults(write_config: WriteConfig) -> None:
    config = load_config(write_config('[defaults]\nmax_tokens = 50\n'))
    assert config.defaults.max_tokens == 50
    assert [t.name for t in config.tiers] == [t.name for t in demo_tiers()]


def test_a_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_an_unknown_tier_key_names_its_line_and_the_allowed_keys(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "synthetic"\ncolour = "red"\n')
    assert message.startswith(", line 4: tiers[0].colour: unknown key for a synthetic tier (expected one of: ")
    assert "tok_s" in message and "ttft_ms" in message


def test_a_wrong_type_names_the_key_and_what_was_expected(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "synthetic"\ntok_s = "fast"\n')
    assert message == ", line 4: tiers[0].tok_s: expected a number, got 'fast'"


def test_true_is_not_a_number(write_config: WriteConfig) -> None:
    message = error_for(write_config, "[defaults]\nmax_tokens = true\n")
    assert message == ", line 2: defaults.max_tokens: expected an integer, got True"


def test_an_error_in_the_second_tier_points_at_the_second_tier(write_config: WriteConfig) -> None:
    text = ('[[tiers]]\nname = "a"\nprovider = "synthetic"\ntok_s = 10\n\n'
            '[[tiers]]\nname = "b"\nprovider = "synthetic"\ntok_s = "slow"\n')
    assert error_for(write_config, text) == ", line 9: tiers[1].tok_s: expected a number, got 'slow'"


def test_a_value_out_of_range_names_its_key_and_line(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "synthetic"\njitter = 2.0\n')
    assert message == ", line 4: tiers[0].jitter: must be at least 0 and below 1 (it is relative: 0.15 means ±15 %)"


def test_an_unknown_provider_lists_the_known_ones(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "telepathy"\n')
    known = ", ".join(known_providers())
    assert message == f", line 3: tiers[0].provider: unknown provider 'telepathy' (known: {known})"
    assert {"synthetic", "replay"} <= set(known_providers())


def test_a_tier_without_a_provider_says_which_are_known(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\n')
    assert message.startswith(", line 2: tiers[0]: missing key 'provider' (one of: ")


def test_a_tier_without_a_name_is_an_error(write_config: WriteConfig) -> None:
    assert error_for(write_config, '[[tiers]]\nprovider = "synthetic"\n') == (
        ", line 2: tiers[0]: missing key 'name' (shown on the lane)")


def test_tier_names_must_be_unique(write_config: WriteConfig) -> None:
    text = '[[tiers]]\nname = "a"\nprovider = "synthetic"\n[[tiers]]\nname = "A"\nprovider = "synthetic"\n'
    assert "line 5: tiers[1].name: another tier is already named 'A'" in error_for(write_config, text)


def test_price_keys_and_values_are_checked(write_config: WriteConfig) -> None:
    base = '[[tiers]]\nname = "a"\nprovider = "synthetic"\n'
    assert error_for(write_config, base + "price = { input = 5, outptu = 30 }\n") == (
        ", line 4: tiers[0].price.outptu: unknown key (expected one of: input, output, cached_input, cache_write)")
    assert error_for(write_config, base + "price = { output = -1 }\n") == (
        ", line 4: tiers[0].price.output: expected a number of USD per million tokens, got -1")


def test_an_unknown_section_or_default_is_named(write_config: WriteConfig) -> None:
    assert error_for(write_config, '[tires]\nname = "x"\n') == (
        ", line 1: tires: unknown section (expected [defaults] or [[tiers]])")
    assert error_for(write_config, '[defaults]\nprompt = "x"\nmax_token = 3\n').startswith(
        ", line 3: defaults.max_token: unknown key (expected one of: prompt, max_tokens")


def test_invalid_toml_is_reported_with_its_position(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[defaults]\nprompt = "unterminated\n')
    assert message.startswith(": not valid TOML: ") and "line 2" in message


def test_a_config_that_is_not_text_is_an_error_not_a_crash(write_config: WriteConfig, tmp_path: Path) -> None:
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe[defaults]\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(path)


def test_an_unknown_preset_lists_the_known_ones(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\npreset = "nowhere"\nmodel = "m"\n')
    assert message.startswith(", line 3: tiers[0].preset: unknown preset 'nowhere' (known: openai, anthropic")


def test_selecting_tiers_by_name_is_case_blind_and_names_the_choices(write_config: WriteConfig) -> None:
    config = load_config(write_config(GOOD))
    assert [t.name for t in config.select("yesterday, SOL ULTRAFAST")] == ["Yesterday", "Sol ultrafast"]
    with pytest.raises(ConfigError, match="no tier named 'nope' \\(tiers: Sol ultrafast, Yesterday\\)"):
        config.select("nope")


def test_parse_config_accepts_the_documented_example() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = page.split("```toml\n", 1)[1].split("```", 1)[0]
    config = parse_config(block, Path("docs/configuration.md"))
    assert [t.provider for t in config.tiers] == ["synthetic", "replay"]


def test_the_demo_is_modelled_on_the_launch_figures() -> None:
    tiers = {t.service_tier: t for t in demo_tiers()}
    standard, priority, ultrafast = tiers["default"], tiers["priority"], tiers["ultrafast"]
    assert all(t.provider == "synthetic" for t in tiers.values())
    assert standard.options["tok_s"] == pytest.approx(750 / 14)
    assert 0.8 <= standard.options["ttft_ms"] / 1000 <= 1.2
    assert priority.options["tok_s"] == pytest.approx(2 * standard.options["tok_s"])
    assert ultrafast.options["tok_s"] == 750 and ultrafast.options["ttft_ms"] < 300
    assert standard.price == Price(input=5.0, output=30.0)
    assert priority.price is None and ultrafast.price is None


def test_any_tier_may_carry_a_speed_profile_for_re_timing(write_config: WriteConfig) -> None:
    config = load_config(write_config('[[tiers]]\nname = "real"\nprovider = "openai"\nmodel = "m"\n'
                                      'ttft_ms = 420\ntok_s = 88.5\nprefill_tok_s = 9000\n'))
    assert config.tiers[0].options == {"ttft_ms": 420, "tok_s": 88.5, "prefill_tok_s": 9000}


def test_a_prefill_rate_of_zero_names_its_key_and_line(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "synthetic"\nprefill_tok_s = 0\n')
    assert message == ", line 4: tiers[0].prefill_tok_s: expected a rate above 0 input tokens per second, got 0"


def test_a_negative_measured_ttft_on_an_http_tier_is_refused(write_config: WriteConfig) -> None:
    message = error_for(write_config, '[[tiers]]\nname = "a"\nprovider = "anthropic"\nmodel = "m"\nttft_ms = -1\n')
    assert message == ", line 5: tiers[0].ttft_ms: expected 0 or more milliseconds, got -1"


ONE_BROKEN = ('[[tiers]]\nname = "good"\nprovider = "synthetic"\ntok_s = 10\n\n'
              '[[tiers]]\nname = "bad"\nprovider = "synthetic"\ntok_s = "slow"\n')


def test_a_broken_tier_does_not_refuse_a_selection_without_it(write_config: WriteConfig) -> None:
    # Reported: one broken tier refused every --tiers selection, even those that leave it out.
    config = load_config(write_config(ONE_BROKEN))
    assert [t.name for t in config.select("good")] == ["good"]


def test_a_broken_tier_is_still_reported_when_selected_or_when_all_are(write_config: WriteConfig) -> None:
    path = write_config(ONE_BROKEN)
    config = load_config(path)
    for names in ("bad", "good,BAD", None):
        with pytest.raises(ConfigError) as caught:
            config.select(names)
        assert str(caught.value) == f"{path}, line 9: tiers[1].tok_s: expected a number, got 'slow'"


def test_an_unknown_name_lists_the_broken_tiers_too(write_config: WriteConfig) -> None:
    config = load_config(write_config(ONE_BROKEN))
    with pytest.raises(ConfigError, match=r"no tier named 'nope' \(tiers: good, bad\)"):
        config.select("nope")
