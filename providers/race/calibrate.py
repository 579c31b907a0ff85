"""Calibration (docs/design.md §12): measure an HTTP tier's TTFT and decode rate with short prompts, so traces can be
re-timed on a real tier, and write the profile next to the tier in the config, keeping the rest of the file."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ..metrics.turn import percentile, turn_metrics
from ..model.errors import ConfigError, TokraceError
from ..model.messages import TurnRequest
from ..model.tiers import TierSpec
from ..timing.clock import LaneClock, RealClock

CALIBRATION_PROMPT: Final[str] = "Count from one to two hundred in words, separated by commas. No other text."
"""A short prompt with a long, predictable answer: a small prefill, and enough tokens to time the decoding."""

CALIBRATION_MAX_TOKENS: Final[int] = 200
"""Output tokens per calibration request: enough to measure the rate, few enough to cost a fraction of a cent."""

HTTP_PROVIDERS: Final[tuple[str, ...]] = ("openai", "openai-responses", "anthropic")
"""The providers calibration can measure (a synthetic tier's profile is its own; a replay has none)."""


class CalibrationError(TokraceError):
    """A tier cannot be calibrated, or its profile cannot be written."""


@dataclass(slots=True)
class Calibration:
    """What the runs of one tier measured."""

    tier: str
    runs: int
    ttft_s: list[float] = field(default_factory=list)
    """Request on the wire to first token (``ttft_s − connect_s``: what the server and the network took), per
    successful run."""
    decode_tok_s: list[float] = field(default_factory=list)
    """Tokens after the first ÷ the time from the first to the last, per successful run."""
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.ttft_s) and bool(self.decode_tok_s)

    @property
    def ttft_ms(self) -> float:
        """The profile's TTFT: the median of the runs, in milliseconds, to a tenth."""
        return round(statistics.median(self.ttft_s) * 1000.0, 1)

    @property
    def tok_s(self) -> float:
        """The profile's decode rate: the median of the runs, to a tenth."""
        return round(statistics.median(self.decode_tok_s), 1)

    def spread(self, values: Sequence[float]) -> tuple[float, float]:
        """The 10th and 90th percentiles of a measure over the runs."""
        return percentile(values, 10), percentile(values, 90)

    def toml_lines(self) -> list[str]:
        """The profile as the TOML lines to paste into the tier's table."""
        return [f"ttft_ms = {self.ttft_ms:g}", f"tok_s = {self.tok_s:g}"]


def check_calibratable(tier: TierSpec) -> None:
    """Refuse a tier calibration cannot measure, with what to do instead."""
    if tier.provider == "synthetic":
        raise CalibrationError(f"tier {tier.name!r} is synthetic: its ttft_ms and tok_s are its profile already")
    if tier.provider not in HTTP_PROVIDERS:
        raise CalibrationError(f"tier {tier.name!r} ({tier.provider}) cannot be calibrated; only HTTP tiers "
                               f"({', '.join(HTTP_PROVIDERS)}) can")


async def calibrate(tier: TierSpec, runs: int, *, prompt: str = CALIBRATION_PROMPT,
                    max_tokens: int = CALIBRATION_MAX_TOKENS, warm_up: bool = True,
                    progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure a tier with ``runs`` requests one after another on the real clock, after one unmeasured warm-up
    request (it opens the connection, as the requests of a working session find it open)."""
    from ..adapters import create_provider

    check_calibratable(tier)
    provider = create_provider(tier)
    result = Calibration(tier=tier.name, runs=runs)
    request = TurnRequest(prompt=prompt, max_tokens=max_tokens)
    clock = RealClock()
    await provider.prepare()
    try:
        for i in range(-1 if warm_up else 0, runs):
            events = [e async for e in provider.stream(request, LaneClock(clock, clock.now()))]
            if i < 0:
                continue
            m = turn_metrics(events, model=tier.model)
            if not m.ok or m.ttft_s is None or m.decode_tok_s is None:
                result.errors.append(m.error or "the answer had fewer than two tokens: no rate to measure")
            else:
                result.ttft_s.append(m.ttft_s - m.connect_s)
                result.decode_tok_s.append(m.decode_tok_s)
            if progress is not None:
                progress(f"{tier.name}: run {i + 1} of {runs}")
    finally:
        await provider.aclose()
    return result


MEASURED: Final[str] = "# measured by tokrace calibrate"
"""How the comment above a written profile starts; calibrating again replaces it."""

_HEADER: Final[re.Pattern[str]] = re.compile(r"\s*\[\[\s*tiers\s*\]\]")
_TABLE: Final[re.Pattern[str]] = re.compile(r"\s*\[")
_KEY: Final[re.Pattern[str]] = re.compile(r"\s*([A-Za-z0-9_\-\"']+)\s*=")


def write_profile(path: Path, index: int, calibration: Calibration, note: str) -> list[int]:
    """Write the measured ``ttft_ms`` and ``tok_s`` into the ``index``-th ``[[tiers]]`` table of a config,
    replacing the values already there or adding them after the table's last key, with a comment line saying
    where they came from. Everything else in the file is kept byte for byte. The result is parsed before it
    replaces the file (atomically); returns the changed lines' numbers."""
    from ..config.load import parse_config

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if index >= len(headers):
        raise CalibrationError(f"{path}: cannot find the tier's [[tiers]] table to write its profile")
    start = headers[index]
    end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
    newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
    values = dict(line.split(" = ", 1) for line in calibration.toml_lines())
    block = [line for line in lines[start + 1:end] if not line.lstrip().startswith(MEASURED)]
    last_key = -1
    for i, line in enumerate(block):
        match = _KEY.match(line)
        if match is None:
            continue
        last_key = i
        key = match.group(1).strip("\"'")
        if key in values:
            block[i] = f"{key} = {values.pop(key)}{newline}"
    if last_key >= 0 and not block[last_key].endswith("\n"):
        block[last_key] += newline
    block[last_key + 1:last_key + 1] = [f"{key} = {value}{newline}" for key, value in values.items()]
    if not lines[start].endswith("\n"):
        lines[start] += newline
    profile = [i for i, line in enumerate(block) if (m := _KEY.match(line)) and m.group(1) in ("ttft_ms", "tok_s")]
    block.insert(profile[0], f"{MEASURED} {note}{newline}")
    lines[start + 1:end] = block
    changed = [start + 2 + profile[0] + k for k in range(profile[-1] - profile[0] + 2)]
    new_text = "".join(lines)
    try:
        config = parse_config(new_text, path)
    except ConfigError as exc:
        raise CalibrationError(f"{path}: the profile was not written, the file would not load: {exc}") from None
    written = config.tiers[index].options
    if (written.get("ttft_ms"), written.get("tok_s")) != (calibration.ttft_ms, calibration.tok_s):
        raise CalibrationError(f"{path}: the profile was not written: the tier's table could not be edited safely")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(new_text)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise CalibrationError(f"{path}: cannot write the profile ({exc.strerror})") from None
    return changed
