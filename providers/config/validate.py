"""Checking TOML values: types, and errors that name the file, the line and the key (configs and scenarios)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Final

from ..model.errors import ConfigError

NUMBER: Final[tuple[type, ...]] = (int, float)

_TYPE_NAMES: Final[dict[type, str]] = {str: "a string", int: "an integer", float: "a number", dict: "a table",
                                       bool: "true or false", list: "a list"}


def expected(types: tuple[type, ...]) -> str:
    if set(types) == {int, float}:
        return "a number"
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def type_ok(value: Any, types: tuple[type, ...]) -> bool:
    """Whether a TOML value has one of ``types``; ``inf`` and ``nan`` (which TOML allows) are never a number."""
    if isinstance(value, bool) and bool not in types:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, types)


class Locator:
    """Finds the line of a key in the raw TOML text, so errors can point at it."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def line_of(self, key: str, table: str | None = None, index: int = 0) -> int | None:
        start = 0
        if table is not None:
            headers = [i for i, line in enumerate(self.lines)
                       if re.match(rf"\s*\[\[?\s*{re.escape(table)}\s*\]\]?", line)]
            if index < len(headers):
                start = headers[index]
        pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
        for i in range(start, len(self.lines)):
            if i > start and table is not None and self.lines[i].lstrip().startswith("["):
                break
            if pattern.match(self.lines[i]) or re.search(rf"[{{,]\s*{re.escape(key)}\s*=", self.lines[i]):
                return i + 1
        return start + 1 if table is not None and start < len(self.lines) else None


def fail(path: Path, line: int | None, where: str, problem: str) -> ConfigError:
    at = f"{path}, line {line}" if line else str(path)
    return ConfigError(f"{at}: {where}: {problem}")
