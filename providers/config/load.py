"""Configuration: find the TOML file, validate it in one place, turn it into tiers and defaults (docs/design.md §5).

Every problem becomes one :class:`ConfigError` naming the file, the line when it can be found, the key and what
was expected; never a traceback.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from ..adapters import known_providers, provider_options
from ..model.errors import ConfigError
from ..model.files import read_regular_text
from ..model.printable import has_controls, one_line
from ..model.tiers import MAX_TOKENS_LIMIT, PRICE_KEYS, Price, TierSpec
from .demo import DEMO_MAX_TOKENS, DEMO_PROMPT, demo_tiers
from .validate import NUMBER, Locator, expected, fail, type_ok

DEFAULT_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "prompt": (str,),
    "max_tokens": (int,),
    "stall_threshold_ms": NUMBER,
    "scenario": (str,),
    "theme": (str,),
    "exact_reads": (bool,),
}
"""Keys of ``[defaults]`` with their TOML types."""

TIER_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "name": (str,),
    "provider": (str,),
    "preset": (str,),
    "model": (str,),
    "base_url": (str,),
    "api_key_env": (str,),
    "service_tier": (str,),
    "price": (dict,),
    "max_tokens": (int,),
}
"""Keys every tier may have, whatever its provider."""

PROFILE_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "ttft_ms": NUMBER,
    "tok_s": NUMBER,
    "prefill_tok_s": NUMBER,
}
"""A tier's speed profile, which any tier may carry (docs/design.md §12): a synthetic tier streams with it, and
re-timing
a trace on a tier uses it. ``ttft_ms`` is the time to first token, ``tok_s`` the decode rate, ``prefill_tok_s``
(optional) input tokens per second added to the TTFT. ``tokrace calibrate`` measures them for HTTP tiers."""

PROFILE_RANGES: Final[dict[str, tuple[float, bool, str]]] = {
    "ttft_ms": (0.0, True, "0 or more milliseconds"),
    "tok_s": (0.0, False, "a rate above 0 tokens per second"),
    "prefill_tok_s": (0.0, False, "a rate above 0 input tokens per second"),
}
"""Each profile key's lower bound, whether the bound itself is allowed, and what to say when it is broken."""
MAX_PRICE: Final[float] = 1_000_000.0
"""The highest price (USD per million tokens) a tier may have: more is a typo."""
MAX_STALL_THRESHOLD_MS: Final[float] = 3_600_000.0


@dataclass(slots=True)
class Defaults:
    """The ``[defaults]`` table."""

    prompt: str = DEMO_PROMPT
    max_tokens: int = DEMO_MAX_TOKENS
    stall_threshold_ms: float = 250.0
    scenario: str | None = None
    theme: str | None = None
    exact_reads: bool = False
    """Every HTTP tier that does not say otherwise reads each packet on its own (its ``exact_reads``)."""


@dataclass(frozen=True, slots=True)
class BrokenTier:
    """A tier of the file that did not validate: refused only when it is selected."""

    index: int
    name: str | None
    """Its ``name`` when it has a readable one (to select it by), else ``None``."""
    error: ConfigError


@dataclass(slots=True)
class Config:
    """A loaded configuration; ``source`` is ``None`` for the built-in demo."""

    source: Path | None
    defaults: Defaults = field(default_factory=Defaults)
    tiers: list[TierSpec] = field(default_factory=demo_tiers)
    """The tiers that validated."""
    broken: list[BrokenTier] = field(default_factory=list)
    """The tiers that did not, each with its error (file, line, key): one broken tier must not refuse a selection
    that leaves it out."""

    @property
    def is_demo(self) -> bool:
        return self.source is None

    def select(self, names: str | None) -> list[TierSpec]:
        """The tiers named in a comma-separated list (all when ``None``); an unknown name is an error, and so is a
        selected tier that did not validate (its own error)."""
        if not names:
            if self.broken:
                raise self.broken[0].error
            return list(self.tiers)
        by_name = {t.name.lower(): t for t in self.tiers}
        broken = {b.name.lower(): b for b in reversed(self.broken) if b.name is not None}
        chosen = []
        for name in (n.strip() for n in names.split(",") if n.strip()):
            tier = by_name.get(name.lower())
            if tier is None and name.lower() in broken:
                raise broken[name.lower()].error
            if tier is None:
                listed = ", ".join([t.name for t in self.tiers] + [b.name for b in self.broken if b.name is not None])
                raise ConfigError(f"no tier named {name!r} (tiers: {listed})")
            chosen.append(tier)
        return chosen


def exact_reads(tiers: list[TierSpec]) -> list[TierSpec]:
    """The tiers with ``exact_reads`` on wherever it applies (HTTP tiers): every packet read and stamped on its own,
    however fast packets come, so that inter-token gaps are always measured (``--exact-reads``)."""
    return [replace(t, options={**t.options, "exact_reads": True}) if "exact_reads" in provider_options(t.provider)
            else t for t in tiers]


def user_config_path() -> Path:
    """The config file in the user's config dir (platformdirs)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("tokrace", appauthor=False)) / "config.toml"


def find_config(explicit: Path | None, cwd: Path | None = None) -> Path | None:
    """The config file to use: ``--config``, then ``./tokrace.toml``, then the user config dir; else ``None``."""
    if explicit is not None:
        if not explicit.exists():
            raise ConfigError(f"{explicit}: no such config file")
        return explicit
    local = (cwd or Path.cwd()) / "tokrace.toml"
    if local.exists():  # a folder or a FIFO by that name is said so when it is read, never passed over
        return local
    user = user_config_path()
    return user if user.is_file() else None


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> Config:
    """Find and load the configuration, or the built-in demo when there is none."""
    path = find_config(explicit, cwd)
    if path is None:
        return Config(source=None)
    try:
        text = read_regular_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the config ({reason})") from None
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> Config:
    """Validate a config's text and build it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    loc = Locator(text)
    for key in data:
        if key not in ("defaults", "tiers"):
            raise fail(path, loc.line_of(key) or loc.line_of(key, key), key,
                        "unknown section (expected [defaults] or [[tiers]])")
    defaults = Defaults()
    raw_defaults = data.get("defaults", {})
    if not isinstance(raw_defaults, dict):
        raise fail(path, loc.line_of("defaults"), "defaults", "expected a table [defaults]")
    for key, value in raw_defaults.items():
        types = DEFAULT_KEYS.get(key)
        if types is None:
            raise fail(path, loc.line_of(key, "defaults"), f"defaults.{key}",
                        f"unknown key (expected one of: {', '.join(DEFAULT_KEYS)})")
        if not type_ok(value, types):
            raise fail(path, loc.line_of(key, "defaults"), f"defaults.{key}",
                        f"expected {expected(types)}, got {value!r}")
        setattr(defaults, key, value)
    if not 1 <= defaults.max_tokens <= MAX_TOKENS_LIMIT:
        raise fail(path, loc.line_of("max_tokens", "defaults"), "defaults.max_tokens",
                   f"expected 1 to {MAX_TOKENS_LIMIT:,} (tokrace's limit), got {defaults.max_tokens}")
    if not 0 < defaults.stall_threshold_ms <= MAX_STALL_THRESHOLD_MS:
        raise fail(path, loc.line_of("stall_threshold_ms", "defaults"), "defaults.stall_threshold_ms",
                   f"expected above 0 and at most {MAX_STALL_THRESHOLD_MS:g} (an hour), got "
                   f"{defaults.stall_threshold_ms}")
    raw_tiers = data.get("tiers")
    if raw_tiers is None:
        return Config(source=path, defaults=defaults)
    if not isinstance(raw_tiers, list) or not raw_tiers:
        raise fail(path, loc.line_of("tiers"), "tiers", "expected one or more [[tiers]] tables")
    tiers: list[TierSpec] = []
    broken: list[BrokenTier] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_tiers):
        name = raw.get("name") if isinstance(raw, dict) else None
        name = name if isinstance(name, str) else None
        try:
            if name is not None and name.lower() in seen:
                raise fail(path, loc.line_of("name", "tiers", i), f"tiers[{i}].name",
                           f"another tier is already named {name!r}; names must be unique")
            tier = _parse_tier(raw, i, path, loc)
            tiers.append(exact_reads([tier])[0] if defaults.exact_reads and "exact_reads" not in tier.options
                         else tier)
        except ConfigError as exc:
            broken.append(BrokenTier(i, name, exc))
        if name is not None:
            seen.add(name.lower())
    return Config(source=path, defaults=defaults, tiers=tiers, broken=broken)


def _parse_tier(raw: Any, i: int, path: Path, loc: Locator) -> TierSpec:
    where = f"tiers[{i}]"
    if not isinstance(raw, dict):
        raise fail(path, None, where, "expected a table")
    raw = dict(raw)
    if "preset" in raw:
        from ..model.presets import apply_preset  # presets fill provider, base_url and the key variable

        try:
            raw = apply_preset(raw)
        except ConfigError as exc:
            raise fail(path, loc.line_of("preset", "tiers", i), f"{where}.preset", str(exc)) from None
    provider = raw.get("provider")
    if provider is None:
        raise fail(path, loc.line_of("name", "tiers", i), where,
                    f"missing key 'provider' (one of: {', '.join(known_providers())}; or a preset)")
    if not isinstance(provider, str) or provider not in known_providers():
        raise fail(path, loc.line_of("provider", "tiers", i), f"{where}.provider",
                    f"unknown provider {provider!r} (known: {', '.join(known_providers())})")
    extra = provider_options(provider)
    for key, value in raw.items():
        types = TIER_KEYS.get(key) or extra.get(key) or PROFILE_KEYS.get(key)
        if types is None:
            allowed = ", ".join(dict.fromkeys([*TIER_KEYS, *extra, *PROFILE_KEYS]))
            raise fail(path, loc.line_of(key, "tiers", i), f"{where}.{key}",
                        f"unknown key for a {provider} tier (expected one of: {allowed})")
        if not type_ok(value, types):
            raise fail(path, loc.line_of(key, "tiers", i), f"{where}.{key}",
                        f"expected {expected(types)}, got {value!r}")
    if "name" not in raw:
        raise fail(path, loc.line_of("provider", "tiers", i), where, "missing key 'name' (shown on the lane)")
    for key in ("name", "model", "service_tier", "api_key_env", "base_url"):
        value = raw.get(key)
        if isinstance(value, str) and has_controls(value):
            raise fail(path, loc.line_of(key, "tiers", i), f"{where}.{key}",
                       f"holds a control character ({one_line(value)!r}); a name is shown and sent as written")
    price = None
    if "price" in raw:
        for key, value in raw["price"].items():
            if key not in PRICE_KEYS:
                raise fail(path, loc.line_of(key, "tiers", i), f"{where}.price.{key}",
                            f"unknown key (expected one of: {', '.join(PRICE_KEYS)})")
            if not type_ok(value, NUMBER) or not 0 <= value <= MAX_PRICE:
                raise fail(path, loc.line_of(key, "tiers", i), f"{where}.price.{key}",
                            f"expected a number of USD per million tokens, got {value!r}")
        price = Price(**raw["price"])
    for key, (low, inclusive, what) in PROFILE_RANGES.items():
        value = raw.get(key)
        if value is not None and (value < low or (value == low and not inclusive)):
            raise fail(path, loc.line_of(key, "tiers", i), f"{where}.{key}", f"expected {what}, got {value!r}")
    if not 1 <= raw.get("max_tokens", 1) <= MAX_TOKENS_LIMIT:
        raise fail(path, loc.line_of("max_tokens", "tiers", i), f"{where}.max_tokens",
                   f"expected 1 to {MAX_TOKENS_LIMIT:,} (tokrace's limit), got {raw['max_tokens']}")
    tier = TierSpec(
        name=raw["name"], provider=provider, model=raw.get("model", ""), base_url=raw.get("base_url"),
        api_key_env=raw.get("api_key_env"), service_tier=raw.get("service_tier"), preset=raw.get("preset"),
        price=price, max_tokens=raw.get("max_tokens"),
        options={k: v for k, v in raw.items() if k not in TIER_KEYS},
    )
    try:
        from ..adapters import create_provider

        create_provider(tier)  # provider-specific checks (a profile's ranges, a replay's file option)
    except ConfigError as exc:
        if exc.key is None or exc.key not in raw:
            raise fail(path, loc.line_of("provider", "tiers", i), where, str(exc)) from None
        problem = str(exc).removeprefix(f"{exc.key} ")
        raise fail(path, loc.line_of(exc.key, "tiers", i), f"{where}.{exc.key}", problem) from None
    return tier
