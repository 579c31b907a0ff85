"""Scenarios: what an agent loop is (model turns, tools, people, waits) and how one lane of a race plays it.

The same scenario runs on every lane. Tool and human latencies are drawn from seeded distributions keyed by
the scenario's seed and the step or call, never by the lane: every lane waits as long for the same tool.

Playing a lane: model steps go to the lane's provider; whatever tool calls come back (scripted ones from
synthetic tiers, the model's own from live tiers) run as simulated tools, and their results go back to the
model until it answers or the turn limit is reached. Tools, people and waits become ``Segment`` events,
emitted when they start (their end is known: they are simulated), so a screen can show them as they happen.
Reading scenario files is :mod:`tokrace.providers.loop.scenario_file`'s job.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from ..adapters import Provider
from ..model.events import Delta, Error, Segment, SegmentKind, ToolCall, loop_end
from ..model.messages import Message, TurnRequest
from ..timing.clock import LaneClock

if TYPE_CHECKING:
    from ..race.race import Race

DEFAULT_MAX_TURNS: Final[int] = 50
"""Model requests one lane may make in a scenario unless it sets ``max_turns``."""

@dataclass(frozen=True, slots=True)
class Latency:
    """How long a tool, a person or a wait takes: fixed, or drawn from a seeded distribution (never < 0)."""

    dist: Literal["fixed", "lognormal", "uniform", "normal"] = "fixed"
    a: float = 0.0
    """Seconds: the fixed value, the median, the minimum or the mean."""
    b: float = 0.0
    """The spread: lognormal sigma, uniform maximum (seconds) or normal standard deviation (seconds)."""

    def draw(self, rng: random.Random) -> float:
        """Seconds for one occurrence."""
        if self.dist == "lognormal":
            return self.a * math.exp(rng.gauss(0.0, self.b))
        if self.dist == "uniform":
            return rng.uniform(self.a, self.b)
        if self.dist == "normal":
            return max(0.0, rng.gauss(self.a, self.b))
        return self.a


@dataclass(frozen=True, slots=True)
class Tool:
    """A simulated tool: what the model sees (name, description, JSON schema) and how it behaves."""

    name: str
    latency: Latency
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    results: tuple[str, ...] = ("done",)
    """Canned results; the n-th call gets the n-th, and the last repeats."""
    error: str = "the tool failed"
    fail_rate: float = 0.0

    def schema(self) -> dict[str, Any]:
        """The protocol-neutral declaration sent with each request: name, description, parameters."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def result(self, n: int) -> str:
        """The canned result of the n-th call (0-based)."""
        return self.results[min(n, len(self.results) - 1)]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """A tool call a scripted model (synthetic tiers) makes in a model step; live models decide their own."""

    tool: str
    arguments: str = "{}"
    """JSON text, as a model would stream it."""
    result: str | None = None
    fail: bool | None = None
    latency: Latency | None = None


@dataclass(frozen=True, slots=True)
class ModelStep:
    """A model request: a new user prompt, or (without one) a follow-up that reads what arrived since."""

    prompt: str | None = None
    max_tokens: int | None = None
    calls: tuple[ScriptedCall, ...] = ()
    label: str = ""
    kind: Literal["model"] = "model"


@dataclass(frozen=True, slots=True)
class ToolStep:
    """A tool the harness runs by itself (not asked for by the model); its output is handed to the model."""

    tool: str
    latency: Latency
    output: str = ""
    label: str = ""
    kind: Literal["tool"] = "tool"


@dataclass(frozen=True, slots=True)
class HumanStep:
    """A person approves, reviews or speaks; their reply, when given, is handed to the model."""

    latency: Latency
    action: str = "review"
    reply: str = ""
    label: str = ""
    kind: Literal["human"] = "human"


@dataclass(frozen=True, slots=True)
class WaitStep:
    """A plain wait (a rollout, a queue, a cool-down)."""

    latency: Latency
    label: str = ""
    kind: Literal["wait"] = "wait"


Step: TypeAlias = ModelStep | ToolStep | HumanStep | WaitStep
"""Any step of a scenario."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named agent loop: tools and steps, played the same on every lane."""

    name: str
    steps: tuple[Step, ...]
    tools: dict[str, Tool] = field(default_factory=dict)
    description: str = ""
    seed: int = 0
    max_turns: int = DEFAULT_MAX_TURNS
    """The most model requests one lane may make; reaching it ends the lane with a ``turn_limit`` error."""
    max_tokens: int | None = None
    parallel_tools: bool = True
    """Several tool calls of one model turn run at the same time (their segments overlap)."""
    source: str = "built-in"

    @property
    def model_steps(self) -> int:
        return sum(1 for s in self.steps if isinstance(s, ModelStep))

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools as declared to the models."""
        return [tool.schema() for tool in self.tools.values()]

    async def play(self, race: Race, index: int, provider: Provider, clock: LaneClock) -> None:
        """Play every step on lane ``index`` of ``race``; the lane ends with the loop's end event or an error."""
        await _Lane(race, index, provider, clock, self).run()

    def first_prompt(self) -> str:
        """The first prompt, or the name when the loop starts elsewhere (used for recordings' headers)."""
        return next((s.prompt for s in self.steps if isinstance(s, ModelStep) and s.prompt), self.name)


def step_rng(scenario: Scenario, *key: object) -> random.Random:
    """The seeded generator for one step or tool call: the same on every lane."""
    return random.Random(":".join(str(k) for k in (scenario.seed, *key)))


@dataclass(frozen=True, slots=True)
class _Planned:
    """A tool call about to run, decided before any time passes so that draws never depend on timing."""

    call: ToolCall
    latency: float
    content: str
    failed: bool
    known: bool


class _Lane:
    def __init__(self, race: Race, index: int, provider: Provider, clock: LaneClock,
                 scenario: Scenario) -> None:
        self.race = race
        self.index = index
        self.provider = provider
        self.clock = clock
        self.scenario = scenario
        self.messages: list[Message] = []
        self.turns = 0
        self.calls_made: dict[str, int] = {}
        self.fresh = False
        """Whether the model has something new to read since its last request."""
        self.scripted: dict[str, ScriptedCall] = {}
        """The last request's scripted calls by the ids they were streamed with."""

    async def run(self) -> None:
        steps = self.scenario.steps
        for i, step in enumerate(steps):
            if isinstance(step, ModelStep):
                if not await self._model_step(step, steps[i + 1] if i + 1 < len(steps) else None):
                    return
                continue
            seconds = step.latency.draw(step_rng(self.scenario, "step", i))
            if isinstance(step, ToolStep):
                await self._span("tool", seconds, step.label or step.tool)
                self._hand_over(step.output)
            elif isinstance(step, HumanStep):
                await self._span("human", seconds, step.label or step.action)
                self._hand_over(step.reply)
            elif isinstance(step, WaitStep):
                await self._span("wait", seconds, step.label or "wait")
        self.race.emit(self.index, loop_end(self.clock.now(), self.scenario.name, self.turns))

    async def _model_step(self, step: ModelStep, nxt: Step | None) -> bool:
        """One model step: a request and, as long as the model calls tools, the tools and another request
        (unless the next step is a follow-up that reads the results). False when the lane has ended."""
        if step.prompt is not None:
            self._say(step.prompt)
        elif not self.fresh:
            return True  # a live model already answered earlier than the script; there is nothing new to read
        hands_on = isinstance(nxt, ModelStep) and nxt.prompt is None
        scripted = step.calls
        while True:
            calls = await self._request(step, scripted)
            if calls is None:
                return False
            if not calls:
                self.fresh = False
                return True
            await self._run_calls(calls)
            self.fresh = True
            if hands_on:
                return True
            scripted = ()

    async def _request(self, step: ModelStep, scripted: tuple[ScriptedCall, ...]) -> list[ToolCall] | None:
        """One model request: the tool calls it made, or ``None`` when it failed or hit the turn limit."""
        if self.turns >= self.scenario.max_turns:
            self.race.emit(self.index, Error(
                t=self.clock.now(), error="turn_limit",
                message=f"turn limit reached: {self.scenario.max_turns} model requests (max_turns of "
                        f"scenario {self.scenario.name!r}); the model was still calling tools"))
            return None
        turn = self.turns
        self.turns += 1
        max_tokens = step.max_tokens or self.scenario.max_tokens or self.race.request.max_tokens
        if self.provider.tier.max_tokens is not None:
            max_tokens = min(max_tokens, self.provider.tier.max_tokens)
        self.scripted = {f"call_{turn}_{j}": c for j, c in enumerate(scripted)}
        request = TurnRequest(
            prompt=self.scenario.first_prompt(), max_tokens=max_tokens, turn=turn,
            messages=list(self.messages), tools=self.scenario.tool_schemas(),
            scripted_tool_calls=[{"id": cid, "name": c.tool, "arguments": c.arguments}
                                 for cid, c in self.scripted.items()])
        events = self.race.lanes[self.index].events
        mark = len(events)
        if not await self.race.run_turn(self.index, self.provider, self.clock, request):
            return None
        answer = "".join(e.text for e in events[mark:] if isinstance(e, Delta) and e.channel == "content")
        calls = [e for e in events[mark:] if isinstance(e, ToolCall)]
        extra = {"tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]}
        self.messages.append(Message("assistant", answer, extra if calls else {}))
        return calls

    async def _run_calls(self, calls: list[ToolCall]) -> None:
        """Run the simulated tools the model asked for (together when the scenario allows parallel calls) and
        hand their results back in the order of the calls."""
        plans = [self._plan(call, self.scripted.get(call.id)) for call in calls]
        if self.scenario.parallel_tools:
            start = self.clock.now()
            for plan in plans:
                self._emit_span("tool", start, plan.latency, _tool_label(plan))
            await self.clock.sleep_until(start + max(p.latency for p in plans))
        else:
            for plan in plans:
                await self._span("tool", plan.latency, _tool_label(plan))
        for plan in plans:
            extra: dict[str, object] = {"tool_call_id": plan.call.id, "name": plan.call.name}
            if plan.failed:
                extra["is_error"] = True
            self.messages.append(Message("tool", plan.content, extra))

    def _plan(self, call: ToolCall, scripted: ScriptedCall | None) -> _Planned:
        tool = self.scenario.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.scenario.tools) or "none"
            return _Planned(call, 0.0, f"error: no tool named {call.name!r} (tools: {known})", True, False)
        if scripted is not None and scripted.tool != call.name:
            scripted = None
        n = self.calls_made.get(call.name, 0)
        self.calls_made[call.name] = n + 1
        rng = step_rng(self.scenario, "tool", call.name, n)
        latency = scripted.latency if scripted is not None and scripted.latency is not None else tool.latency
        seconds = latency.draw(rng)
        if scripted is not None and scripted.fail is not None:
            failed = scripted.fail
        else:
            failed = tool.fail_rate > 0 and rng.random() < tool.fail_rate
        if failed:
            content = tool.error
        elif scripted is not None and scripted.result is not None:
            content = scripted.result
        else:
            content = tool.result(n)
        return _Planned(call, seconds, content, failed, True)

    async def _span(self, kind: SegmentKind, seconds: float, label: str) -> None:
        start = self.clock.now()
        self._emit_span(kind, start, seconds, label)
        await self.clock.sleep_until(start + seconds)

    def _emit_span(self, kind: SegmentKind, start: float, seconds: float, label: str) -> None:
        self.race.emit(self.index, Segment(t=start, seg=kind, start=start, end=start + seconds, label=label))

    def _hand_over(self, text: str) -> None:
        """Give the model a harness tool's output or a person's reply (as the user's next words)."""
        if text:
            self._say(text)
            self.fresh = True

    def _say(self, text: str) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last.role == "user" and not last.extra:
            # Consecutive user words are one message in every protocol (earlier requests keep their own copy).
            self.messages[-1] = Message("user", f"{last.content}\n\n{text}")
        else:
            self.messages.append(Message("user", text))


def _tool_label(plan: _Planned) -> str:
    if not plan.known:
        return f"{plan.call.name} (unknown tool)"
    return f"{plan.call.name} (failed)" if plan.failed else plan.call.name
