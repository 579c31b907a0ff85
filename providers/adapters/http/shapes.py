"""Shapes the protocols share: a tool given in any protocol's form, and a number deep in a usage object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tool_parts(tool: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(name, description, JSON-Schema parameters) of a tool given in the neutral form ``{"name",
    "description", "parameters"}``, or in OpenAI's nested or Anthropic's ``input_schema`` form."""
    spec = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    assert isinstance(spec, Mapping)
    params = spec.get("parameters", spec.get("input_schema")) or {"type": "object", "properties": {}}
    return str(spec.get("name", "")), str(spec.get("description", "")), dict(params)


def usage_number(data: Mapping[str, Any], *path: str) -> int:
    """An integer deep in a usage object, 0 when any step is missing or null."""
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping):
            return 0
        value = value.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
