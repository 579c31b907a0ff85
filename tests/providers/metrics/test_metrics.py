"""Metrics (docs/design.md §6): one definition each, as pure functions of a turn's events, with their edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokrace.providers.metrics import turn as metrics
from tokrace.providers.metrics.turn import (
    DEFINITIONS,
    WIRE_DEFINITIONS,
    TurnMetrics,
    percentile,
    split_turns,
    summarize,
    turn_metrics,
)
from tokrace.providers.model import tokens
from tokrace.providers.model.events import Delta, Done, Error, Event, Headers, Request, Segment, ToolCall, Usage
from tokrace.providers.model.tiers import Price


@pytest.fixture
def no_o200k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty tiktoken cache: only the bundled offline cl100k can count."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))


def stream(*deltas: tuple[float, str], end: float | None = None, usage: int | None = None,
           start: float = 0.0) -> list[Event]:
    """A turn: request at ``start``, headers 10 ms later, the given content deltas, usage, done."""
    events: list[Event] = [Request(t=start), Headers(t=start + 0.01)]
    events += [Delta(t=t, text=text) for t, text in deltas]
    last = end if end is not None else (deltas[-1][0] if deltas else start + 0.01)
    if usage is not None:
        events.append(Usage(t=last, input=10, output=usage))
    events.append(Done(t=last))
    return events


# --- times -----------------------------------------------------------------------------------------------------

def test_every_time_is_measured_from_the_request() -> None:
    m = turn_metrics(stream((5.3, "Hi."), (5.4, " Bye"), start=5.0, end=5.5, usage=2))
    assert m.ttfb_s == pytest.approx(0.01)
    assert m.ttft_s == pytest.approx(0.3)
    assert m.e2e_s == pytest.approx(0.5)


def test_connect_is_the_end_of_the_connect_segment() -> None:
    events = stream((0.4, "Hi"), usage=1)
    events.insert(1, Segment(t=0.08, seg="connect", start=0.0, end=0.08, label="tls"))
    m = turn_metrics(events)
    assert m.connect_s == 0.08
    assert [(s.kind, s.start, s.end) for s in m.segments] == [("connect", 0.0, 0.08), ("pending", 0.08, 0.4),
                                                              ("model", 0.4, 0.4)]


def test_ttft_ignores_role_only_and_empty_first_chunks() -> None:
    m = turn_metrics(stream((0.1, ""), (0.2, ""), (0.5, "Hello"), (0.6, " world"), usage=2))
    assert m.ttft_s == 0.5
    assert m.token_events == 2


def test_a_run_with_no_token_at_all_failed_and_has_no_ttft_never_zero() -> None:
    m = turn_metrics([Request(t=0.0), Headers(t=0.1), Delta(t=0.2, text=""),
                      Error(t=0.3, error="http", message="HTTP 500: boom", status=500)])
    assert not m.ok
    assert m.error == "HTTP 500: boom"
    assert m.ttft_s is None and m.ttfa_s is None and m.ttfs_s is None
    assert m.decode_tok_s is None and m.itl_ms is None
    assert m.output_tokens == 0
    assert m.e2e_s == 0.3
    assert m.to_json()["ttft_s"] is None


def test_a_turn_that_ends_normally_without_any_token_is_a_failed_run() -> None:
    m = turn_metrics(stream(end=0.4, usage=0))
    assert not m.ok
    assert m.ttft_s is None
    assert m.error == "the turn ended without generating any token"


def test_a_turn_whose_only_output_is_a_tool_call_did_not_fail() -> None:
    m = turn_metrics([Request(t=0.0), ToolCall(t=0.3, id="c1", name="run_tests", arguments=""),
                      Done(t=0.3, finish_reason="tool_calls")])
    assert m.ok


def test_a_turn_that_never_ended_failed() -> None:
    m = turn_metrics([Request(t=0.0), Delta(t=0.2, text="Hel")])
    assert not m.ok
    assert m.error is not None and "never ended" in m.error
    assert m.ttft_s == 0.2


def test_exactly_one_token_has_a_ttft_but_no_decode_rate_or_gaps() -> None:
    m = turn_metrics(stream((0.25, "Yes"), end=0.3, usage=1))
    assert m.ok
    assert (m.ttft_s, m.e2e_s, m.output_tokens) == (0.25, 0.3, 1)
    assert m.decode_tok_s is None
    assert m.itl_ms is None
    assert m.stalls == 0
    assert m.tokens_per_event == 1.0
    assert m.e2e_tok_s == pytest.approx(1 / 0.3)


def test_reasoning_before_the_answer_counts_for_ttft_but_not_ttfa() -> None:
    events: list[Event] = [Request(t=0.0), Delta(t=0.2, text="Let me think", channel="reasoning"),
                           Delta(t=0.6, text="So", channel="reasoning"), Delta(t=1.0, text="Answer."),
                           Delta(t=1.1, text=" More"), Usage(t=1.2, output=5, reasoning=2), Done(t=1.2)]
    m = turn_metrics(events)
    assert m.ttft_s == 0.2
    assert m.ttfa_s == 1.0
    assert m.ttfs_s == 1.1
    assert [(s.kind, s.start, s.end) for s in m.segments] == [("pending", 0.0, 0.2), ("think", 0.2, 1.0),
                                                              ("model", 1.0, 1.2)]


def test_tool_arguments_are_generated_tokens_too() -> None:
    m = turn_metrics([Request(t=0.0), Delta(t=0.3, text='{"a"', channel="tool_args"),
                      Delta(t=0.4, text=": 1}", channel="tool_args"), Done(t=0.4, finish_reason="tool_calls")])
    assert m.ttft_s == 0.3
    assert m.ttfa_s is None


def test_ttfa_skips_whitespace_only_content() -> None:
    m = turn_metrics(stream((0.2, "\n"), (0.3, "\n"), (0.5, "Answer"), usage=3))
    assert m.ttft_s == 0.2
    assert m.ttfa_s == 0.5


def test_ttfs_is_the_delta_that_completes_the_first_sentence() -> None:
    m = turn_metrics(stream((0.2, "It costs 3"), (0.3, ".5 dollars"), (0.4, "."), (0.5, " Then"), (0.6, " more"),
                            usage=5))
    assert m.ttfs_s == 0.5


def test_ttfs_of_a_one_sentence_answer_is_the_end_of_the_turn() -> None:
    m = turn_metrics(stream((0.2, "Yes"), (0.3, " indeed"), end=0.45, usage=2))
    assert m.ttfs_s == 0.45


def test_decode_rate_counts_tokens_after_the_first_event_over_the_streaming_time() -> None:
    m = turn_metrics(stream(*[(0.5 + i * 0.01, " w") for i in range(101)], usage=101))
    assert m.decode_tok_s == pytest.approx(100.0)
    assert m.e2e_tok_s == pytest.approx(101 / 1.5)


def test_several_tokens_per_event_use_the_first_events_own_count() -> None:
    events: list[Event] = [Request(t=0.0)]
    events += [Delta(t=0.2 + i * 0.004, text=" a b c", tokens=3) for i in range(10)]
    events += [Usage(t=0.236, output=30), Done(t=0.236)]
    m = turn_metrics(events)
    assert m.decode_tok_s == pytest.approx(27 / 0.036)
    assert m.tokens_per_event == 3.0
    assert m.itl_ms is not None and m.itl_ms["p50"] == pytest.approx(4.0)


def test_hidden_reasoning_in_usage_is_not_counted_as_streamed() -> None:
    events: list[Event] = [Request(t=0.0)]
    events += [Delta(t=1.0 + i * 0.01, text=" w", tokens=1) for i in range(11)]
    events += [Usage(t=1.1, output=111, reasoning=100), Done(t=1.1)]
    m = turn_metrics(events)
    assert m.output_tokens == 111
    assert m.decode_tok_s == pytest.approx(100.0)


# --- tokens ----------------------------------------------------------------------------------------------------

def test_cumulative_usage_is_replaced_never_added() -> None:
    events = stream((0.2, "a"), (0.3, " b"), (0.4, " c"))
    events[-1:-1] = [Usage(t=0.2, input=10, output=1), Usage(t=0.3, input=10, output=2),
                     Usage(t=0.4, input=10, output=3, cached=4)]
    m = turn_metrics(events)
    assert (m.output_tokens, m.tokens_source, m.input_tokens) == (3, "usage", 10)


@pytest.mark.usefixtures("no_o200k")
def test_without_usage_the_tokenizer_counts_the_streamed_text_and_names_its_encoding() -> None:
    text = ["The", " bottleneck", " moves", " when", " the", " model", " gets", " fast", "."]
    m = turn_metrics(stream(*[(0.1 * (i + 1), w) for i, w in enumerate(text)]), model="gpt-5.6-sol")
    assert m.tokens_source == "tokenizer"
    assert m.encoding == "cl100k_base"
    expected = tokens.count("".join(text), "gpt-5.6-sol")
    assert expected is not None and m.output_tokens == expected[0]


def test_usage_without_output_counts_falls_back_to_the_tokenizer_but_keeps_input() -> None:
    events = stream((0.1, "Hello"), (0.2, " there"))
    events.insert(-1, Usage(t=0.2, input=42, output=0))
    m = turn_metrics(events)
    assert m.tokens_source == "tokenizer"
    assert m.input_tokens == 42


def test_without_usage_or_tokenizer_the_chunks_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "get_encoding", lambda model: ("cl100k_base", None))
    m = turn_metrics(stream((0.1, "Hello"), (0.2, " there"), (0.3, ""), (0.4, " friend")))
    assert (m.output_tokens, m.tokens_source, m.encoding) == (3, "chunks", None)
    assert m.decode_tok_s == pytest.approx(2 / 0.3)


# --- gaps and stalls -------------------------------------------------------------------------------------------

def test_itl_percentiles_interpolate_between_the_gaps() -> None:
    times = [0.2, 0.21, 0.23, 0.26, 0.30, 0.40]  # gaps 10, 20, 30, 40, 100 ms
    m = turn_metrics(stream(*[(t, " x") for t in times], usage=6))
    assert m.itl_ms is not None
    assert m.itl_ms["p50"] == pytest.approx(30.0)
    assert m.itl_ms["p90"] == pytest.approx(76.0)
    assert m.itl_ms["p99"] == pytest.approx(97.6)
    assert m.itl_ms["max"] == pytest.approx(100.0)


def test_stalls_are_gaps_longer_than_the_threshold_after_the_first_token() -> None:
    times = [2.0, 2.1, 2.35, 2.9, 3.0, 3.4]  # a 2 s wait first (not a stall); gaps 100, 250, 550, 100, 400 ms
    m = turn_metrics(stream(*[(t, " x") for t in times], usage=6))
    assert m.stalls == 2
    assert turn_metrics(stream(*[(t, " x") for t in times], usage=6), stall_threshold_s=0.5).stalls == 1


# --- cost ------------------------------------------------------------------------------------------------------

def priced_turn(price: Price | None) -> TurnMetrics:
    events = stream((0.1, "a"), (0.2, " b"))
    events.insert(-1, Usage(t=0.2, input=1000, output=200, cached=400))
    return turn_metrics(events, price=price)


def test_cost_prices_cached_input_apart() -> None:
    m = priced_turn(Price(input=5.0, output=30.0, cached_input=0.5))
    assert m.cost_usd == pytest.approx((600 * 5.0 + 400 * 0.5 + 200 * 30.0) / 1e6)


def test_cached_input_without_its_own_price_costs_the_input_price() -> None:
    assert priced_turn(Price(input=5.0, output=30.0)).cost_usd == pytest.approx((1000 * 5 + 200 * 30) / 1e6)


def test_no_published_price_means_no_cost_rather_than_zero() -> None:
    assert priced_turn(None).cost_usd is None
    assert priced_turn(Price(input=5.0)).cost_usd is None


# --- helpers and the contract ----------------------------------------------------------------------------------

def test_percentile_of_one_value_is_that_value_and_of_none_is_an_error() -> None:
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_split_turns_cuts_at_each_request_and_keeps_tool_time_with_the_turn_before() -> None:
    tool = Segment(t=1.5, seg="tool", start=1.0, end=1.5)
    events: list[Event] = [Request(t=0.0), Done(t=1.0), tool, Request(t=1.5, turn=1), Done(t=2.0)]
    assert split_turns(events) == [events[:3], events[3:]]


def test_summary_takes_percentiles_over_the_successful_runs_only() -> None:
    runs = [turn_metrics(stream((t, "x"), (t + 0.01, " y"), usage=2)) for t in (0.1, 0.2, 0.3)]
    runs.append(turn_metrics([Request(t=0.0), Error(t=9.0, error="http", message="boom")]))
    summary = summarize(runs)
    assert summary["ttft_s"] == {"p50": 0.2, "p90": 0.28}
    assert summary["e2e_s"] == {"p50": 0.21}


def test_every_metric_in_the_json_has_a_one_line_definition() -> None:
    run = turn_metrics(stream((0.1, "a"), (0.2, " b"), usage=2)).to_json()
    measured = set(run) - {"ok", "error", "tokens_source", "segments"}
    assert measured <= set(DEFINITIONS) | set(WIRE_DEFINITIONS)
    assert all("\n" not in line for line in [*DEFINITIONS.values(), *WIRE_DEFINITIONS.values()])
    assert metrics.STALL_THRESHOLD_S == 0.25


def test_a_turn_that_failed_before_any_answer_has_no_e2e() -> None:
    never = turn_metrics([Request(t=0.0), Error(t=1.34, error="connect", message="connection refused")])
    assert never.e2e_s is None and never.error == "connection refused"
    answered = turn_metrics([Request(t=0.0), Headers(t=0.5), Error(t=1.34, error="http", message="500")])
    assert answered.e2e_s == 1.34


def test_one_huge_answer_is_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn of one 10 MB event was counted for its total and again as its first event's tokens (seconds each)."""
    counted: list[int] = []
    real = tokens.count

    def spy(text: str, model: str = "", end: int | None = None) -> tuple[int, str] | None:
        counted.append(len(text) if end is None else end)
        return real(text, model, end)

    monkeypatch.setattr(metrics.tokenizer, "count", spy)
    text = "word " * 40_000
    m = turn_metrics([Request(t=0.0), Delta(t=0.5, text=text), Done(t=0.6)])
    assert m.tokens_source == "tokenizer" and m.output_tokens > 0
    assert sum(counted) <= len(text)


def test_an_answer_without_a_word_break_is_counted_as_it_comes_not_held_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """60 events of 4 MB of one word were joined and held until the end: 240 MB, and more at each doubling."""
    seen: list[int] = []
    real = tokens.count

    def spy(text: str, model: str = "", end: int | None = None) -> tuple[int, str] | None:
        seen.append(len(text))
        return real(text, model, end)

    monkeypatch.setattr(metrics.tokenizer, "count", spy)
    piece = "y" * 100_000
    counted = metrics.count_text([piece] * 20)
    assert counted is not None and max(seen) <= 2 * len(piece) + tokens.TAIL_CHARS
    exact = tokens.count(piece * 20)
    assert exact is not None and abs(counted[0] - exact[0]) <= 20 * len(piece) // tokens.WORD_CUT_CHARS + 20


def test_a_turns_metrics_are_the_same_read_from_its_event_log_as_from_its_list() -> None:
    """A lane's events read back from its log in columns (never made into deltas again): every figure the same
    as from the events themselves, across spooled blocks, with stalls, empty texts, joined chunks, every channel
    and counts present and absent."""
    from tokrace.providers.model.eventlog import BLOCK, EventLog

    events: list[Event] = [Request(t=0.0, model="m"), Headers(t=0.05)]
    t = 0.1
    for i in range(3 * BLOCK + 77):
        t += 0.7 if i in (9, 2 * BLOCK + 5) else 0.001 * (1 + i % 5)  # two stalls
        channel = "reasoning" if i < 40 else ("tool_args" if i % 301 == 0 else "content")
        text = "" if i % 97 == 3 else (" Done." if i == 60 else f" w{i % 13}")
        chunks = 3 if i % 211 == 17 else 1
        events.append(Delta(t=t, text=text, channel=channel, tokens=None if chunks > 1 or i % 2 else 1,  # type: ignore[arg-type]
                            chunks=chunks))
    events += [Usage(t=t, input=5, output=3 * BLOCK + 500), Done(t=t + 0.01)]
    log = EventLog(events)
    assert log._stored  # the metrics read spooled blocks
    from_list, from_log = turn_metrics(list(events)), turn_metrics(log)
    assert from_log == from_list
    assert from_list.stalls == 2 and from_list.segments and from_list.ttfs_s is not None
