"""The comparison over a set of traces: the checklist per column, the seeded bootstrap interval, the verdict
sentence built from the table's own figures, and the JSON, Markdown and CSV forms."""

from __future__ import annotations

import csv
import io
import random
import re

import pytest
from test_retime import PROFILE, parallel_tools, random_trace, sequential

from tokrace.providers.model.tiers import Price
from tokrace.providers.traces.compare import NO_PRICE, bootstrap_ci, compare
from tokrace.providers.traces.model import Step, Trace
from tokrace.providers.traces.report import CHECKLIST, comparison_json, csv_text, markdown, table
from tokrace.providers.traces.retime import TierProfile

PRICED = TierProfile(name="fast", ttft_s=0.5, tok_s=100.0, price=Price(input=10.0, output=60.0))
SLOW = TierProfile(name="slow", ttft_s=2.0, tok_s=10.0)


def test_hand_computed_comparison_and_its_verdict() -> None:
    # sequential: 25 s (model 20); parallel tools: 12 s (model 7). On the tier: 9.0 s and 7.5 s.
    cmp = compare([sequential(), parallel_tools()], [PRICED], original_price=Price(input=5.0, output=30.0))
    original, fast = cmp.columns
    assert original.total_task_s == pytest.approx(37.0)
    assert fast.total_task_s == pytest.approx(16.5)
    assert original.model_share == pytest.approx(27 / 37)
    assert original.amdahl_max_speedup == pytest.approx(3.7)
    assert original.total_cost_usd == pytest.approx(450 * 30 / 1e6)
    assert fast.total_cost_usd == pytest.approx(450 * 60 / 1e6)
    assert fast.speedup == pytest.approx(37 / 16.5)
    assert original.tool_wait_s == pytest.approx(10.0)
    assert cmp.verdict == ("On these 2 traces, fast would have saved 20.5 s of 37.0 s (55%), for $0.0135 more; "
                           "the model was 73% of the time; no tier could save more than 73%. Input processing "
                           "is not modelled on fast (no prefill_tok_s): its TTFT is the same whatever the input. "
                           "No 95% interval: 2 traces are too few (10 or more needed).")
    assert fast.ci95 is None


def test_the_verdict_uses_the_figures_the_table_prints() -> None:
    rng = random.Random(4)
    traces = [random_trace(rng, 40) for _ in range(6)]
    cmp = compare(traces, [SLOW, PROFILE], original_price=Price(input=1.0, output=2.0))
    header, rows = table(cmp)
    by_label = {row[0]: row[1:] for row in rows}
    total = by_label["total task time"][0]
    assert f" of {total} (" in cmp.verdict
    assert f"the model was {by_label['model share'][0]} of the time" in cmp.verdict
    assert cmp.verdict.startswith("On these 6 traces, fast would have saved ")
    assert "at a cost not known (fast has no price)" in cmp.verdict
    assert header == ["", "original", "slow", "fast"]
    assert [row[0] for row in rows] == list(CHECKLIST)


def test_a_slower_tier_is_said_to_be_slower() -> None:
    cmp = compare([sequential()], [TierProfile(name="crawl", ttft_s=5.0, tok_s=1.0)])
    assert cmp.verdict.startswith("On this trace, no tier would have saved time: crawl would have taken ")


def test_bootstrap_interval_contains_the_point_estimate_and_is_reproducible() -> None:
    rng = random.Random(9)
    traces = [random_trace(rng, rng.randint(5, 40)) for _ in range(12)]
    first = compare(traces, [PROFILE], seed=7).columns[1]
    again = compare(traces, [PROFILE], seed=7).columns[1]
    other = compare(traces, [PROFILE], seed=8).columns[1]
    assert first.ci95 is not None and first.speedup is not None
    assert first.ci95[0] <= first.speedup <= first.ci95[1]
    assert first.ci95[0] < first.ci95[1]
    assert again.ci95 == first.ci95
    assert other.ci95 != first.ci95


def test_bootstrap_of_identical_traces_is_a_point() -> None:
    assert bootstrap_ci([10.0] * 10, [5.0] * 10) == (2.0, 2.0)


def test_no_interval_on_fewer_than_ten_traces() -> None:
    # a bootstrap over 3 values is the range of those values, not a 95% interval
    assert bootstrap_ci([10.0, 12.0, 30.0], [5.0, 8.0, 3.0]) is None
    assert bootstrap_ci([10.0] * 9, [5.0] * 9) is None
    assert bootstrap_ci([], []) is None


def test_original_price_falls_back_to_a_tier_with_the_same_model() -> None:
    trace = Trace(file="m", format="t", steps=[
        Step(id="a", kind="model", start=0, end=2, model="gpt-x", input_tokens=1000, cached_input_tokens=500,
             output_tokens=100)])
    cmp = compare([trace], [PROFILE], tier_prices={"gpt-x": Price(input=2.0, output=8.0, cached_input=0.2)})
    assert cmp.columns[0].total_cost_usd == pytest.approx((500 * 2.0 + 500 * 0.2 + 100 * 8.0) / 1e6)
    assert cmp.original_price == "a tier with the same model"
    unpriced = compare([trace], [PROFILE])
    assert unpriced.columns[0].total_cost_usd is None
    assert unpriced.original_price == NO_PRICE


def test_human_review_and_retries_are_counted_per_column() -> None:
    trace = Trace(file="h", format="t", steps=[
        Step(id="m1", kind="model", start=0, end=4, output_tokens=100),
        Step(id="r", kind="retry", start=4, end=5, after=("m1",)),
        Step(id="m2", kind="model", start=5, end=9, after=("r",), output_tokens=100),
        Step(id="h", kind="human", start=9, end=39, after=("m2",)),
    ])
    original, fast = compare([trace], [PROFILE]).columns
    assert (original.human_steps, original.human_review_s, original.retry_rate) == (1, 30.0, 0.5)
    assert (fast.human_steps, fast.human_review_s, fast.retry_rate) == (1, 30.0, 0.5)
    assert fast.human_share == pytest.approx(30 / (1.5 + 1 + 1.5 + 30))


DESIGN_TRACE_KEYS = {"file", "format", "session", "models", "skipped", "calls", "tool_calls", "human_steps",
                     "retries", "input_tokens", "cached_input_tokens", "output_tokens", "e2e_s", "away_s",
                     "breakdown", "model_share", "amdahl_max_speedup", "ttft_s", "on"}
DESIGN_SUMMARY_KEYS = {"traces", "total_task_s", "task_s", "total_cost_usd", "ttft_s", "tool_wait_s", "tool_share",
                       "retry_rate", "human_steps", "human_review_s", "human_share", "model_share",
                       "amdahl_max_speedup"}


def test_json_has_every_key_of_design_section_12() -> None:
    doc = comparison_json(compare([sequential(), parallel_tools()], [PRICED, SLOW]), "9.9")
    assert doc["tool"] == "tokrace" and doc["version"] == "9.9"
    for entry in doc["traces"]:
        assert set(entry) >= DESIGN_TRACE_KEYS
        assert set(entry["on"]) == {"fast", "slow"}
        for on in entry["on"].values():
            assert {"e2e_s", "breakdown", "cost_usd", "speedup"} <= set(on)
    assert set(doc["summary"]) == {"original", "fast", "slow"}
    assert set(doc["summary"]["original"]) >= DESIGN_SUMMARY_KEYS
    assert "speedup" not in doc["summary"]["original"]
    for tier in ("fast", "slow"):
        assert set(doc["summary"][tier]) >= DESIGN_SUMMARY_KEYS
        assert set(doc["summary"][tier]["speedup"]) == {"total", "ci95"}


def test_markdown_is_a_github_table_led_by_the_verdict() -> None:
    cmp = compare([sequential(), parallel_tools()], [PRICED])
    text = markdown(cmp)
    lines = text.splitlines()
    assert lines[0] == cmp.verdict
    assert lines[2] == "|  | original | fast |"
    assert lines[3] == "|---|---:|---:|"
    assert all(re.fullmatch(r"\|.*\|", line) for line in lines[2:4 + len(CHECKLIST)])
    assert "| total task time | 37.0 s | 16.5 s |" in lines


def test_csv_has_the_set_and_every_trace_on_every_tier() -> None:
    cmp = compare([sequential(), parallel_tools()], [PRICED])
    rows = list(csv.DictReader(io.StringIO(csv_text(cmp))))
    assert [(r["scope"], r["tier"]) for r in rows] == [
        ("all", "original"), ("all", "fast"), ("seq", "original"), ("seq", "fast"), ("tools", "original"),
        ("tools", "fast")]
    assert float(rows[1]["task_s"]) == pytest.approx(16.5)
    assert float(rows[3]["speedup"]) == pytest.approx(25 / 9)


def test_calls_without_output_tokens_are_counted_and_footnoted() -> None:
    from tokrace.providers.traces.report import footnotes

    trace = Trace(file="u", format="t", steps=[
        Step(id="a", kind="model", start=0, end=5), Step(id="b", kind="model", start=5, end=9, after=("a",),
                                                          output_tokens=100)])
    cmp = compare([trace], [PROFILE])
    assert cmp.kept_calls == 1
    assert "1 of 2 model calls record no output tokens: they keep their recorded duration on every tier" \
        in footnotes(cmp)
    assert cmp.columns[1].total_task_s == pytest.approx(5 + 1.5)


def test_no_tier_saves_more_than_the_bound_the_verdict_states() -> None:
    # "no tier could save more than B %": even a tier with no TTFT and a near-infinite rate stays within it
    rng = random.Random(23)
    for _ in range(25):
        traces = [random_trace(rng, rng.randint(5, 40)) for _ in range(3)]
        tiers = [TierProfile(name="instant", ttft_s=0.0, tok_s=1e12),
                 TierProfile(name="quick", ttft_s=rng.uniform(0, 0.5), tok_s=rng.uniform(100, 3000))]
        original, *columns = compare(traces, tiers).columns
        assert original.amdahl_max_speedup is not None
        bound = 1 - 1 / original.amdahl_max_speedup
        for column in columns:
            assert 1 - column.total_task_s / original.total_task_s <= bound + 1e-9


def test_the_cost_clause_says_less_or_the_same() -> None:
    cheap = TierProfile(name="cheap", ttft_s=0.5, tok_s=100.0, price=Price(input=1.0, output=2.0))
    same = TierProfile(name="same", ttft_s=0.5, tok_s=100.0, price=Price(input=5.0, output=30.0))
    sol = Price(input=5.0, output=30.0)
    assert ", for $0.0126 less;" in compare([sequential(), parallel_tools()], [cheap], original_price=sol).verdict
    assert ", at the same cost;" in compare([sequential(), parallel_tools()], [same], original_price=sol).verdict


def cached_trace() -> Trace:
    return Trace("c", "test", steps=[Step("m1", "model", 0.0, 10.0, input_tokens=10_000, cached_input_tokens=8_000,
                                          cache_write_tokens=1_000, output_tokens=100)])


def test_the_verdict_says_when_cached_input_or_cache_writes_got_the_input_price() -> None:
    cmp = compare([cached_trace()], [PRICED], original_price=Price(input=5.0, output=30.0, cached_input=0.5))
    assert "Cached input (8,000 tokens) is priced at the input price for fast, which sets no cached input " \
           "price." in cmp.verdict
    assert "Cache writes (1,000 tokens) are priced at the input price for the original and fast, which set no " \
           "cache write price." in cmp.verdict
    full = TierProfile("fast", ttft_s=0.5, tok_s=100.0,
                       price=Price(input=10.0, output=60.0, cached_input=1.0, cache_write=12.5))
    cmp = compare([cached_trace()], [full], original_price=Price(5.0, 30.0, cached_input=0.5, cache_write=6.25))
    assert "input price" not in cmp.verdict
    unpriced = compare([cached_trace()], [SLOW], original_price=Price(5.0, 30.0))
    assert "input price" not in unpriced.verdict  # no money compared: nothing to qualify


def test_an_empty_trace_in_the_set_leaves_the_bound_measured() -> None:
    empty = Trace("e", "test", steps=[Step("m", "model", 3.0, 3.0, output_tokens=1)])
    cmp = compare([sequential(), empty], [PRICED])
    assert cmp.columns[0].amdahl_max_speedup == pytest.approx(25 / 5)
    assert "no tier could save more than 80%" in cmp.verdict
def test_every_duration_of_the_comparison_is_in_seconds_whatever_its_size() -> None:
    """One format on every screen and table (docs/design.md §6): a column never mixes "12.3 min" and "597 s",
    a TTFT is not "1895 ms" in one table and "1.90 s" in another, a share is "53%" everywhere."""
    from tokrace.providers.traces.report import cells, seconds

    long = Trace(file="long", format="t", steps=[
        Step(id="m1", kind="model", start=0, end=700.0, output_tokens=100, ttft_s=1.895),
        Step(id="t1", kind="tool", start=700.0, end=2892.7, after=("m1",))])
    cmp = compare([long], [PROFILE])
    assert seconds(736.3) == "736.3 s" and seconds(None) == "—"
    original = cells(cmp.columns[0])
    assert original[0] == "2892.7 s" and original[3] == "1.90 s / 1.90 s"
    assert "of 2892.7 s" in cmp.verdict and " min" not in cmp.verdict and " %" not in cmp.verdict
