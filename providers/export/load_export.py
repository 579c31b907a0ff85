"""A load (``bench --concurrency``) as a table, Markdown, CSV and a self-contained HTML page with a plot of the
aggregate rate and TTFT against the number of streams (docs/design.md §14)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, Final

from .. import __version__
from ..model.printable import csv_cell
from ..model.units import NOT_KNOWN, duration
from ..runs.load import LoadResult
from . import markdown
from .html_report import _colours, _css, table_html
from .tables import Column, Row, Table, fmt

LOAD_DEFINITIONS: Final[dict[str, str]] = {
    "streams": "concurrent streams on the tier: each sends its next request as soon as its last one ends",
    "tok/s": "aggregate delivered tok/s: every output token that arrived in the load window ÷ the window's wall "
             "time (from the start to the last event of the last request)",
    "req/s": "requests that ended (ok or failed) ÷ the load window",
    "TTFT": "request start → first generated token, per request (docs: Metrics), percentiles over the requests "
            "that succeeded",
    "decode": "per request, tokens after the first ÷ first token → last token; the median over the requests",
    "e2e": "request start → final event, per request",
    "ITL": "per request, the mean gap between output tokens after the first (1 ÷ its decode rate)",
}
"""What each column of the load table means (the Markdown and the HTML print these under it)."""

CSV_COLUMNS: Final[tuple[str, ...]] = (
    "tier", "provider", "model", "concurrency", "requests", "ok", "failed", "window_s", "output_tokens",
    "delivered_tok_s", "request_rate", *(f"{m}_{q}" for m in ("ttft_s", "decode_tok_s", "e2e_s", "itl_s")
                                        for q in ("p50", "p90", "p99")), "first_error")
"""One CSV row per tier and level: the keys of the JSON's points, percentiles flattened."""


def _ms(x: float | None, digits: int = 1) -> str:
    """Seconds as milliseconds (ITL: gaps of a millisecond or two, where seconds would show only zeros)."""
    return NOT_KNOWN if x is None else f"{x * 1000:.{digits}f} ms"


def _s(x: float | None) -> str:
    """A TTFT or end-to-end time, in seconds to the millisecond as every other table tells it."""
    return duration(x, 3)


def _q(stats: Mapping[str, Any] | None, q: str) -> float | None:
    return None if stats is None else stats.get(q)


def load_table(result: LoadResult) -> Table:
    """One row per tier and level: the aggregates, and the percentiles over the requests."""
    plan = result.plan
    end = (f"{plan.duration_s:g} s per level" if plan.duration_s is not None else
           f"{plan.requests} requests per tier and level" if plan.requests is not None else
           "4 requests per stream")
    columns = [Column("tier"), Column("streams", True), Column("requests", True), Column("tok/s", True),
               Column("req/s", True), Column("TTFT p50", True), Column("TTFT p90", True), Column("TTFT p99", True),
               Column("decode p50", True), Column("e2e p50", True), Column("e2e p99", True),
               Column("ITL p50", True), Column("ITL p99", True), Column("result")]
    stopped = " — stopped before its end: what ended by then, and the requests cut short" if result.stopped else ""
    table = Table(f"tokrace under load — {end}{stopped}", columns,
                  caption="tok/s: all output tokens ÷ the load window; TTFT, decode, e2e, ITL: per request, "
                          "over the requests that succeeded")
    for point in result.points:
        stats = point.percentiles()
        ttft, dec, e2e, itl = stats["ttft_s"], stats["decode_tok_s"], stats["e2e_s"], stats["itl_s"]
        failed = point.failed
        table.rows.append(Row(
            [point.tier.name, str(point.concurrency), str(len(point.rows)), fmt(point.delivered_tok_s, "", 1),
             fmt(point.request_rate, "", 2), _s(_q(ttft, "p50")), _s(_q(ttft, "p90")), _s(_q(ttft, "p99")),
             fmt(_q(dec, "p50"), "", 1), _s(_q(e2e, "p50")), _s(_q(e2e, "p99")), _ms(_q(itl, "p50"), 2),
             _ms(_q(itl, "p99"), 2), "ok" if not failed and point.rows else f"{len(failed)} failed"],
            failed=len(failed) if point.rows else 1,
            reason=(failed[0].error or "") if failed else "" if point.rows else "no request was sent"))
    return table


def csv_rows(result: LoadResult) -> list[dict[str, Any]]:
    """The CSV's rows as values (the JSON's numbers)."""
    out = []
    for point in result.points:
        data = point.to_json()
        row = {key: data.get(key) for key in CSV_COLUMNS}
        for metric in ("ttft_s", "decode_tok_s", "e2e_s", "itl_s"):
            for q in ("p50", "p90", "p99"):
                row[f"{metric}_{q}"] = _q(data[metric], q)
        out.append(row)
    return out


def to_csv(result: LoadResult) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for row in csv_rows(result):
        writer.writerow([csv_cell(row.get(name)) for name in CSV_COLUMNS])
    return buffer.getvalue()


def to_markdown(result: LoadResult, prompt: str) -> str:
    plain = load_table(result)
    lines = [f"## {markdown.text(markdown_title(prompt))}", "", f"**{markdown.text(plain.title)}**", "",
             *markdown.table(plain), "", f"*{markdown.text(plain.caption)}*", "", "### What the numbers mean", ""]
    lines += [f"- **{markdown.text(name)}**: {markdown.text(text)}" for name, text in LOAD_DEFINITIONS.items()]
    return "\n".join(lines) + "\n"


def markdown_title(prompt: str) -> str:
    words = " ".join(prompt.split())
    return f"tokrace under load: {words if len(words) <= 80 else words[:79] + '…'}"


PLOT_W: Final[int] = 560
PLOT_H: Final[int] = 300
PAD_L, PAD_R, PAD_T, PAD_B = 70, 20, 30, 50


def _axis(values: Sequence[float]) -> tuple[float, float, bool]:
    """The x axis over the levels: a log scale when they span 4× or more."""
    lo, hi = min(values), max(values)
    log = hi / lo >= 4
    return (math.log2(lo), math.log2(hi), True) if log else (lo, hi, False)


def _nice_top(value: float) -> float:
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(m * power for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * power >= value))


def plot_svg(result: LoadResult, metric: str, colours: Mapping[str, str]) -> str:
    """One panel against the streams per tier: ``tok/s`` (aggregate delivered rate) or ``ttft`` (p50 solid, p99
    dashed, in ms); a point per level with its value in a hover title."""
    levels = sorted({p.concurrency for p in result.points})
    lo, hi, log = _axis(levels)
    width = PLOT_W - PAD_L - PAD_R
    height = PLOT_H - PAD_T - PAD_B

    def x(n: int) -> float:
        v = math.log2(n) if log else n
        return PAD_L + (width * (v - lo) / (hi - lo) if hi > lo else width / 2)

    series: list[tuple[int, str, list[tuple[int, float]]]] = []
    for i, tier in enumerate(result.tiers):
        points = [p for p in result.points if p.tier is tier]
        if metric == "tok/s":
            series.append((i, "", [(p.concurrency, v) for p in points if (v := p.delivered_tok_s) is not None]))
        else:
            for q, dash in (("p50", ""), ("p99", "6 4")):
                series.append((i, dash, [(p.concurrency, v * 1000.0) for p in points
                                         if (v := _q(p.percentiles()["ttft_s"], q)) is not None]))
    top = _nice_top(max((v for _, _, pts in series for _, v in pts), default=1.0))

    def y(v: float) -> float:
        return PAD_T + height * (1 - v / top)

    unit = "tok/s" if metric == "tok/s" else "ms"
    title = "aggregate delivered tok/s" if metric == "tok/s" else "TTFT p50 (solid) and p99 (dashed), ms"
    body = [f'<text x="{PAD_L}" y="18" class="lane-name">{escape(title)}</text>']
    for k in range(5):
        v = top * k / 4
        body.append(f'<line class="grid" x1="{PAD_L}" x2="{PAD_L + width}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                    f'<text class="tick" x="{PAD_L - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for n in levels:
        body.append(f'<text class="tick" x="{x(n):.1f}" y="{PAD_T + height + 20}" text-anchor="middle">{n}</text>')
    body.append(f'<text class="tick" x="{PAD_L + width / 2:.1f}" y="{PLOT_H - 8}" text-anchor="middle">'
                "concurrent streams</text>")
    for lane, dash, pts in series:
        colour = colours.get(f"lane-{lane % 6}", "#0072B2")
        name = escape(result.tiers[lane].name)
        coords = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        style = f' stroke-dasharray="{dash}"' if dash else ""
        if len(pts) > 1:
            body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2.5"{style} points="{coords}"/>')
        what = "" if metric == "tok/s" else (" p99" if dash else " p50")
        for n, v in pts:
            body.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="4" fill="{colour}"><title>{name}{what} at {n} '
                        f"streams: {v:.1f} {unit}</title></circle>")
    return (f'<svg viewBox="0 0 {PLOT_W} {PLOT_H}" role="img" aria-label="{escape(title)}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>')


def to_html(result: LoadResult, prompt: str, colours: Mapping[str, str] | None = None) -> str:
    """The whole page: the table, the two panels side by side, a legend of the tiers, what the numbers mean."""
    palette = _colours(colours)
    plain = load_table(result)
    keys = "".join(f'<li><svg class="key" viewBox="0 0 10 10"><rect width="10" height="10" '
                   f'fill="{palette[f"lane-{i % 6}"]}"/></svg>{escape(t.name)}</li>'
                   for i, t in enumerate(result.tiers))
    definitions = "".join(f"<dt>{escape(name)}</dt><dd>{escape(text)}</dd>" for name, text in LOAD_DEFINITIONS.items())
    title = markdown_title(prompt)
    parts = [f"<header><h1>{escape(title)}</h1><p class=\"facts\">{escape(plain.title)}</p>"
             f'<p class="prompt">{escape(prompt.strip())}</p></header>',
             f"<section><h2>Results</h2>{table_html(plain)}</section>",
             '<section><h2>Against the number of streams</h2><div class="plots">'
             f"{plot_svg(result, 'tok/s', palette)}{plot_svg(result, 'ttft', palette)}</div>"
             f'<ul class="legend">{keys}</ul></section>',
             f"<section><h2>What the numbers mean</h2><dl>{definitions}</dl></section>",
             f"<footer>Made by tokrace {escape(__version__)}: the numbers are those of "
             "<code>tokrace bench --concurrency</code>.</footer>"]
    css = _css(palette) + "\n.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1.5em}"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{escape(title)}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")

