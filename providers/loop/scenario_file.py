"""Scenario files: TOML agent loops validated in one place (every error names the file, line and key), and
the built-in scenarios shipped in ``scenarios/``."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Final

from ..config.validate import NUMBER, Locator, expected, fail, type_ok
from ..model.errors import ConfigError
from ..model.events import MAX_SECONDS
from ..model.files import read_regular_text
from ..model.tiers import MAX_TOKENS_LIMIT
from .scenario import (
    DEFAULT_MAX_TURNS,
    HumanStep,
    Latency,
    ModelStep,
    Scenario,
    ScriptedCall,
    Step,
    Tool,
    ToolStep,
    WaitStep,
)

MAX_TURNS: Final[int] = 10_000
"""The most model requests a scenario may allow per lane."""
MAX_SIGMA: Final[float] = 5.0
"""The widest lognormal latency (a sigma of 5 already spans a factor of 10^4 either side of the median)."""

TOOL_NAME: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every protocol accepts as a function name."""

TOP_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "name": (str,), "description": (str,), "seed": (int,), "max_turns": (int,), "max_tokens": (int,),
    "parallel_tools": (bool,), "tools": (list,), "steps": (list,),
}
TOOL_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "name": (str,), "description": (str,), "parameters": (dict,), "latency_s": (int, float, dict),
    "result": (str, list), "error": (str,), "fail_rate": NUMBER,
}
_LATENCY: Final[tuple[type, ...]] = (int, float, dict)
STEP_KEYS: Final[dict[str, dict[str, tuple[type, ...]]]] = {
    "model": {"kind": (str,), "label": (str,), "prompt": (str,), "max_tokens": (int,), "calls": (list,)},
    "tool": {"kind": (str,), "label": (str,), "tool": (str,), "latency_s": _LATENCY, "output": (str,)},
    "human": {"kind": (str,), "label": (str,), "action": (str,), "latency_s": _LATENCY, "reply": (str,)},
    "wait": {"kind": (str,), "label": (str,), "latency_s": _LATENCY},
}
"""The keys each kind of step accepts."""
CALL_KEYS: Final[dict[str, tuple[type, ...]]] = {
    "tool": (str,), "arguments": (dict,), "result": (str,), "fail": (bool,), "latency_s": (int, float, dict),
}
HUMAN_ACTIONS: Final[tuple[str, ...]] = ("approval", "review", "speak")
"""What a person does in a human step: approve, review, or speak (a caller talking to a voice agent)."""
DISTRIBUTIONS: Final[dict[str, tuple[str, ...]]] = {
    "lognormal": ("median", "sigma"), "uniform": ("min", "max"), "normal": ("mean", "sd"),
}
"""Latency distributions and the parameters each needs (seconds, except ``sigma`` which is unitless)."""



def builtin_names() -> list[str]:
    """The names of the built-in scenarios."""
    folder = resources.files("tokrace.providers.loop.scenarios")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def builtin_scenarios() -> list[Scenario]:
    """Every built-in scenario, loaded."""
    return [load_scenario(name) for name in builtin_names()]


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, or a scenario file by path; anything else is one clear error."""
    if name_or_path in builtin_names():
        folder = resources.files("tokrace.providers.loop.scenarios")
        text = folder.joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
        return parse_scenario(text, Path(f"{name_or_path}.toml"), source="built-in")
    path = Path(name_or_path)
    if path.is_file():
        try:
            text = read_regular_text(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the scenario ({exc})") from None
        return parse_scenario(text, path, source=str(path))
    raise ConfigError(f"no scenario {name_or_path!r}: not a built-in ({', '.join(builtin_names())}) "
                      "and no such file")


def _expected_of(key: str, types: tuple[type, ...]) -> str:
    if key == "latency_s":
        return "a number of seconds or a table like { dist = \"lognormal\", median = 6, sigma = 0.2 }"
    return expected(types)


class _Checker:
    """Validation helpers bound to one file, so every error names the file, the line and the key."""

    def __init__(self, text: str, path: Path) -> None:
        self.loc = Locator(text)
        self.path = path

    def fail(self, key: str, where: str, problem: str, table: str | None = None,
             index: int = 0) -> ConfigError:
        return fail(self.path, self.loc.line_of(key, table, index), where, problem)

    def keys(self, raw: dict[str, Any], allowed: dict[str, tuple[type, ...]], where: str, table: str | None,
             index: int, what: str) -> None:
        for key, value in raw.items():
            types = allowed.get(key)
            if types is None:
                raise self.fail(key, f"{where}{key}", f"unknown key for {what} (expected one of: "
                                f"{', '.join(allowed)})", table, index)
            if not type_ok(value, types):
                raise self.fail(key, f"{where}{key}", f"expected {_expected_of(key, types)}, got {value!r}",
                                table, index)

    def latency(self, value: Any, where: str, table: str, index: int) -> Latency:
        key = "latency_s"
        if not isinstance(value, dict):
            if not 0 <= value <= MAX_SECONDS:
                raise self.fail(key, where, f"expected 0 to {MAX_SECONDS:g} seconds, got {value!r}", table, index)
            return Latency("fixed", float(value))
        dist = value.get("dist")
        if dist not in DISTRIBUTIONS:
            raise self.fail(key, f"{where}.dist", f"expected one of {', '.join(DISTRIBUTIONS)} (or a plain "
                            f"number of seconds), got {dist!r}", table, index)
        params = DISTRIBUTIONS[dist]
        for k in value:
            if k != "dist" and k not in params:
                raise self.fail(key, f"{where}.{k}", f"unknown key for a {dist} latency (expected: dist, "
                                f"{', '.join(params)})", table, index)
        for k in params:
            v = value.get(k)
            if v is None:
                raise self.fail(key, where, f"a {dist} latency needs {', '.join(params)}", table, index)
            most = MAX_SIGMA if k == "sigma" else MAX_SECONDS
            if not type_ok(v, NUMBER) or not 0 <= v <= most:
                raise self.fail(key, f"{where}.{k}", f"expected a number from 0 to {most:g}, got {v!r}", table,
                                index)
        a, b = float(value[params[0]]), float(value[params[1]])
        if dist == "uniform" and b < a:
            raise self.fail(key, f"{where}.max", f"must not be below min ({a:g})", table, index)
        return Latency(dist, a, b)


def parse_scenario(text: str, path: Path, source: str | None = None) -> Scenario:
    """Validate a scenario's TOML text and build it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    ck = _Checker(text, path)
    ck.keys(data, TOP_KEYS, "", None, 0, "a scenario")
    tools: dict[str, Tool] = {}
    for i, raw in enumerate(data.get("tools", [])):
        tool = _parse_tool(raw, i, ck)
        if tool.name in tools:
            raise ck.fail("name", f"tools[{i}].name", f"another tool is already named {tool.name!r}",
                          "tools", i)
        tools[tool.name] = tool
    raw_steps = data.get("steps", [])
    if not raw_steps:
        raise ck.fail("steps", "steps", "a scenario needs at least one [[steps]] table")
    steps = tuple(_parse_step(raw, i, ck, tools) for i, raw in enumerate(raw_steps))
    if not any(isinstance(s, ModelStep) for s in steps):
        raise ck.fail("steps", "steps", "a scenario needs at least one model step (kind = \"model\")")
    _check_follow_ups(steps, ck)
    for key, most in (("max_turns", MAX_TURNS), ("max_tokens", MAX_TOKENS_LIMIT)):
        if key in data and not 1 <= data[key] <= most:
            raise ck.fail(key, key, f"expected 1 to {most:,}, got {data[key]}")
    return Scenario(
        name=data.get("name", path.stem), steps=steps, tools=tools, description=data.get("description", ""),
        seed=data.get("seed", 0), max_turns=data.get("max_turns", DEFAULT_MAX_TURNS),
        max_tokens=data.get("max_tokens"), parallel_tools=data.get("parallel_tools", True),
        source=source or str(path),
    )


def _parse_tool(raw: Any, i: int, ck: _Checker) -> Tool:
    where = f"tools[{i}]"
    if not isinstance(raw, dict):
        raise ck.fail("tools", where, "expected a table [[tools]]")
    ck.keys(raw, TOOL_KEYS, f"{where}.", "tools", i, "a tool")
    name = raw.get("name")
    if name is None:
        raise ck.fail("name", where, "missing key 'name'", "tools", i)
    if not TOOL_NAME.match(name):
        raise ck.fail("name", f"{where}.name", f"{name!r}: use letters, digits, _ or - (at most 64)",
                      "tools", i)
    if "latency_s" not in raw:
        raise ck.fail("name", where, "missing key 'latency_s' (how long the tool takes, in seconds)",
                      "tools", i)
    params = raw.get("parameters", {"type": "object", "properties": {}})
    if params.get("type") != "object":
        raise ck.fail("parameters", f"{where}.parameters", "expected a JSON schema with type = \"object\"",
                      "tools", i)
    results = raw.get("result", "done")
    if isinstance(results, list):
        if not results or not all(isinstance(r, str) for r in results):
            raise ck.fail("result", f"{where}.result", "expected a string or a list of strings", "tools", i)
        results = tuple(results)
    else:
        results = (results,)
    rate = raw.get("fail_rate", 0.0)
    if not 0 <= rate <= 1:
        raise ck.fail("fail_rate", f"{where}.fail_rate", f"expected 0 to 1, got {rate!r}", "tools", i)
    return Tool(name=name, latency=ck.latency(raw["latency_s"], f"{where}.latency_s", "tools", i),
                description=raw.get("description", ""), parameters=params, results=results,
                error=raw.get("error", "the tool failed"), fail_rate=float(rate))


def _parse_step(raw: Any, i: int, ck: _Checker, tools: dict[str, Tool]) -> Step:
    where = f"steps[{i}]"
    if not isinstance(raw, dict):
        raise ck.fail("steps", where, "expected a table [[steps]]")
    kind = raw.get("kind")
    if kind not in STEP_KEYS:
        raise ck.fail("kind", f"{where}.kind", f"expected one of {', '.join(STEP_KEYS)}, got {kind!r}",
                      "steps", i)
    ck.keys(raw, STEP_KEYS[kind], f"{where}.", "steps", i, f"a {kind} step")
    label = raw.get("label", "")
    if kind == "model":
        if not 1 <= raw.get("max_tokens", 1) <= MAX_TOKENS_LIMIT:
            raise ck.fail("max_tokens", f"{where}.max_tokens", f"expected 1 to {MAX_TOKENS_LIMIT:,}", "steps", i)
        calls = tuple(_parse_call(c, f"{where}.calls[{j}]", i, ck, tools)
                      for j, c in enumerate(raw.get("calls", [])))
        return ModelStep(prompt=raw.get("prompt"), max_tokens=raw.get("max_tokens"), calls=calls, label=label)
    if kind == "tool" and "tool" not in raw:
        raise ck.fail("kind", where, "missing key 'tool' (the tool's name)", "steps", i)
    tool = tools.get(raw["tool"]) if kind == "tool" else None
    if "latency_s" in raw:
        latency = ck.latency(raw["latency_s"], f"{where}.latency_s", "steps", i)
    elif tool is not None:
        latency = tool.latency
    else:
        hint = " (or name a declared tool)" if kind == "tool" else ""
        raise ck.fail("kind", where, f"missing key 'latency_s' (how long it takes, in seconds){hint}",
                      "steps", i)
    if kind == "tool":
        output = raw.get("output", tool.result(0) if tool is not None else "")
        return ToolStep(tool=raw["tool"], latency=latency, output=output, label=label)
    if kind == "human":
        action = raw.get("action", "review")
        if action not in HUMAN_ACTIONS:
            raise ck.fail("action", f"{where}.action",
                          f"expected one of {', '.join(HUMAN_ACTIONS)}, got {action!r}", "steps", i)
        return HumanStep(latency=latency, action=action, reply=raw.get("reply", ""), label=label)
    return WaitStep(latency=latency, label=label)


def _parse_call(raw: Any, where: str, i: int, ck: _Checker, tools: dict[str, Tool]) -> ScriptedCall:
    if not isinstance(raw, dict):
        raise ck.fail("calls", where, "expected a table like { tool = \"name\", arguments = { ... } }",
                      "steps", i)
    for key, value in raw.items():
        types = CALL_KEYS.get(key)
        if types is None:
            raise ck.fail("calls", f"{where}.{key}", f"unknown key for a call (expected one of: "
                          f"{', '.join(CALL_KEYS)})", "steps", i)
        if not type_ok(value, types):
            raise ck.fail("calls", f"{where}.{key}", f"expected {_expected_of(key, types)}, got {value!r}",
                          "steps", i)
    name = raw.get("tool")
    if name is None:
        raise ck.fail("calls", where, "missing key 'tool'", "steps", i)
    if name not in tools:
        known = ", ".join(tools) or "none are declared; add [[tools]] tables"
        raise ck.fail("calls", f"{where}.tool", f"no tool named {name!r} (tools: {known})", "steps", i)
    latency = ck.latency(raw["latency_s"], f"{where}.latency_s", "steps", i) if "latency_s" in raw else None
    return ScriptedCall(tool=name, arguments=json.dumps(raw.get("arguments", {}), ensure_ascii=False),
                        result=raw.get("result"), fail=raw.get("fail"), latency=latency)


def _check_follow_ups(steps: tuple[Step, ...], ck: _Checker) -> None:
    """A follow-up (a model step without a prompt) needs something new to read: tool results, a harness tool's
    output or a person's reply. Tool results a model step asked for are read by the next step when it is a
    follow-up; otherwise the model gets a request of its own to read them, and answers."""
    fresh = False
    for i, step in enumerate(steps):
        if isinstance(step, ModelStep):
            if step.prompt is None and not fresh:
                raise ck.fail("kind", f"steps[{i}]", "a follow-up model step needs something new to read: "
                              "put it after a model step with calls, a tool step with output or a human step "
                              "with a reply, or give it a prompt", "steps", i)
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            fresh = bool(step.calls) and isinstance(nxt, ModelStep) and nxt.prompt is None
        elif isinstance(step, ToolStep):
            fresh = fresh or bool(step.output)
        elif isinstance(step, HumanStep):
            fresh = fresh or bool(step.reply)
