"""A race as one self-contained HTML page: the summary, bench's table, the timeline as inline SVG on one shared
time axis (a hover title on every segment), and for a loop where the time went, as bars and as bench's table.

No script, no font, no image and no style sheet is fetched: a browser shows it offline, a projector shows it
large, and it prints on white (``@media print``). Colours come from the caller (the theme's, passed in by the
command line) or from :data:`NEUTRAL`; every colour is checked to be a plain ``#RRGGBB`` before it is written.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from html import escape
from typing import Final

from .. import __version__
from ..metrics.turn import DEFINITIONS, SegmentSpan, TurnMetrics
from ..model.events import SEGMENT_KINDS
from ..model.kinds import THIN_KINDS, WORDS, colour_name
from ..model.units import duration, percent
from ..race.summary import summary_of_run
from . import tables
from .markdown import TABLE_TERMS, title
from .race_data import ExportSource

NEUTRAL: Final[dict[str, str]] = {
    "primary": "#1F6FD1", "foreground": "#1D2130", "background": "#FFFFFF", "surface": "#F4F5F7",
    "panel": "#D9DCE3",
    "lane-0": "#0072B2", "lane-1": "#D55E00", "lane-2": "#009E73", "lane-3": "#CC79A7", "lane-4": "#E69F00",
    "lane-5": "#56B4E9",
    "seg-connect": "#A7AFBF", "seg-wait": "#5B6375", "seg-think": "#8E5CC8", "seg-model": "#0072B2",
    "seg-tool": "#E69F00", "seg-human": "#009E73", "seg-retry": "#D55E00", "seg-stall": "#CC79A7",
}
"""Colours that read on white and under colour blindness (Okabe–Ito), used where the caller gives none."""

SEGMENT_WORDS: Final[dict[str, str]] = WORDS
"""What each segment kind is called in the legend and the hover titles."""

PART_KINDS: Final[dict[str, str]] = {"model": "seg-model"}
"""A bottleneck part's colour: ``model`` (all time waiting on the model API) wears the model's colour."""

_HEX: Final[re.Pattern[str]] = re.compile(r"#[0-9A-Fa-f]{6}")

WIDTH: Final[int] = 1200
"""The SVGs' coordinate width (they scale to the page)."""
LABEL_W: Final[int] = 250
ROW_H: Final[int] = 30
SUB_H: Final[int] = 14
"""The height of a parallel row (tool calls at the same time) under a lane's own."""


def _colours(given: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(NEUTRAL)
    for key, value in (given or {}).items():
        if key in out and isinstance(value, str) and _HEX.fullmatch(value):
            out[key] = value
    return out


def _s(seconds: float) -> str:
    return duration(seconds)


def nice_step(span: float, ticks: int = 8) -> float:
    """A round step (1, 2 or 5 × a power of ten) giving about ``ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= raw))


def pack(spans: Sequence[SegmentSpan]) -> list[tuple[int, SegmentSpan]]:
    """Each span with its row: the lane's own (0), or a row below for spans that overlap it (parallel tools)."""
    ends: list[float] = []
    out = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        row = next((i for i, end in enumerate(ends) if end <= span.start + 1e-9), None)
        if row is None:
            row = len(ends)
            ends.append(span.end)
        else:
            ends[row] = span.end
        out.append((row, span))
    return out


def timeline_svg(source: ExportSource, run: int = 0) -> str:
    """One row per lane on a shared time axis; waits thin, work solid, parallel work on rows of its own."""
    lanes = source.lanes(run)
    metrics = [source.result.metrics[i][run] for i in range(len(lanes))]
    end = max([m.start + (m.e2e_s or 0.0) for m in metrics] + [s.end for m in metrics for s in m.segments] + [0.0])
    end = end or 1.0
    plot = WIDTH - LABEL_W - 90

    def x(t: float) -> float:
        return LABEL_W + plot * max(t, 0.0) / end
    body: list[str] = []
    y = 34
    for i, (lane, m) in enumerate(zip(lanes, metrics, strict=True)):
        packed = pack(m.segments)
        rows = 1 + max((row for row, _ in packed), default=0)
        height = ROW_H + (rows - 1) * SUB_H
        name = escape(lane.tier.name)
        body.append(f'<g class="lane"><title>{name}: {escape(_state(m))}</title>'
                    f'<rect class="swatch" x="0" y="{y + 7}" width="12" height="{ROW_H - 14}" '
                    f'style="fill:var(--lane-{i % 6})"/>'
                    f'<text x="20" y="{y + ROW_H / 2 + 6:.1f}" class="lane-name">{name}</text></g>')
        for row, span in packed:
            top = y + (0 if row == 0 else ROW_H + (row - 1) * SUB_H)
            h = (ROW_H if row == 0 else SUB_H) - 4
            thin = span.kind in THIN_KINDS
            ry, rh = (top + h / 2 - 3, 6.0) if thin else (top + 2, float(h))
            w = max(x(span.end) - x(span.start), 0.8)
            label = f" {span.label}" if span.label else ""
            tip = (f"{lane.tier.name}: {SEGMENT_WORDS.get(span.kind, span.kind)}{label}, "
                   f"{_s(span.start)} → {_s(span.end)} ({_s(span.end - span.start)})")
            body.append(f'<rect class="seg seg-{span.kind}" x="{x(span.start):.2f}" y="{ry:.1f}" width="{w:.2f}" '
                        f'height="{rh:.1f}"><title>{escape(tip)}</title></rect>')
        if m.e2e_s is not None:
            body.append(f'<text class="end" x="{x(m.start + m.e2e_s) + 6:.1f}" y="{y + ROW_H / 2 + 5:.1f}">'
                        f'{escape(_s(m.e2e_s))}</text>')
        y += height + 8
    step = nice_step(end)
    ticks = []
    t = 0.0
    while t <= end + 1e-9:
        ticks.append(f'<line class="grid" x1="{x(t):.2f}" y1="24" x2="{x(t):.2f}" y2="{y}"/>'
                     f'<text class="tick" x="{x(t):.2f}" y="16" text-anchor="middle">{t:g} s</text>')
        t = round(t + step, 9)
    return (f'<svg class="timeline" viewBox="0 0 {WIDTH} {y + 6}" role="img" '
            f'aria-label="timeline of every lane on a shared time axis">{"".join(ticks)}{"".join(body)}</svg>')


def _state(m: TurnMetrics) -> str:
    return "finished" if m.ok else f"failed: {m.error}" if m.error else "did not finish"


def legend(kinds: Sequence[str]) -> str:
    items = [f'<li><svg viewBox="0 0 14 14" class="key"><rect class="seg seg-{kind}" width="14" height="14"/></svg>'
             f"{escape(SEGMENT_WORDS.get(kind, kind))}</li>" for kind in kinds]
    return f'<ul class="legend">{"".join(items)}</ul>'


def bottleneck_svg(source: ExportSource) -> str:
    """Per lane a bar of its loop split into the model, tools, people and waits, on one scale."""
    rows = tables.lane_bottlenecks(source.result, source.what_if)
    longest = max((b.e2e_s for b in rows), default=0.0) or 1.0
    plot = WIDTH - LABEL_W - 120
    body: list[str] = []
    y = 6
    for b in rows:
        name = escape(b.name)
        body.append(f'<text x="0" y="{y + ROW_H / 2 + 6:.1f}" class="lane-name">{name}</text>')
        x = float(LABEL_W)
        for part, seconds, share in b.parts:
            w = plot * seconds / longest
            kind = PART_KINDS.get(part, f"seg-{part}")
            tip = f"{b.name}: {part} {duration(seconds, 1)} ({percent(share)} of the loop)"
            body.append(f'<rect class="seg {kind}" x="{x:.2f}" y="{y + 2}" width="{max(w, 0.8):.2f}" '
                        f'height="{ROW_H - 4}"><title>{escape(tip)}</title></rect>')
            if w > 64:
                body.append(f'<text class="part" x="{x + w / 2:.1f}" y="{y + ROW_H / 2 + 5:.1f}" '
                            f'text-anchor="middle">{escape(part)} {share:.0%}</text>')
            x += w
        body.append(f'<text class="end" x="{x + 6:.1f}" y="{y + ROW_H / 2 + 5:.1f}">{duration(b.e2e_s, 1)}</text>')
        y += ROW_H + 8
    return (f'<svg class="bars" viewBox="0 0 {WIDTH} {y}" role="img" aria-label="where each lane\'s time went">'
            f'{"".join(body)}</svg>')


HEADER_TERMS: Final[dict[str, str]] = {**TABLE_TERMS, "loop": "e2e_s", "model": "model_share",
                                       "Amdahl": "amdahl_max_speedup"}
"""Columns whose heading carries the metric's definition as its hover title."""


def table_html(plain: tables.Table) -> str:
    def heading(name: str) -> str:
        term = HEADER_TERMS.get(name) or ("what_if" if name.endswith("faster model") else None)
        tip = f' title="{escape(DEFINITIONS[term])}"' if term is not None else ""
        return f"{escape(name)}" if not tip else f"<abbr{tip}>{escape(name)}</abbr>"

    head = "".join(f'<th class="{"num" if c.right else ""}">{heading(c.name)}</th>' for c in plain.columns)
    body = []
    for row in plain.rows:
        cls = "strong" if row.strong else "dim" if row.dim else ""
        cells = "".join(f'<td class="{"num" if c.right else ""}">{escape(cell)}</td>'
                        for c, cell in zip(plain.columns, row.cells, strict=True))
        body.append(f'<tr class="{cls}">{cells}</tr>')
    caption = f'<p class="caption">{escape(plain.caption)}</p>' if plain.caption else ""
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f"</div>{caption}")


def sentence_html(pieces: Sequence[tuple[str, str]]) -> str:
    return "".join(f"<strong>{escape(text)}</strong>" if "bold" in style else escape(text) for text, style in pieces)


def _css(colours: Mapping[str, str]) -> str:
    variables = ";".join(f"--{key}:{value}" for key, value in colours.items())
    segments = "".join(f".seg-{kind}{{fill:var(--{colour_name(kind)})}}" for kind in SEGMENT_KINDS)
    return f""":root{{{variables}}}
*{{box-sizing:border-box}}
html{{background:var(--background);color:var(--foreground)}}
body{{margin:0 auto;max-width:1500px;padding:2.2rem 2.5rem 3rem;
font:clamp(16px,1.25vw,22px)/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}}
h1{{font-size:1.9em;line-height:1.15;margin:0 0 .3em;overflow-wrap:anywhere}}
h2{{font-size:1.3em;margin:1.6em 0 .5em}}
.facts{{opacity:.8;margin:0 0 1.2em;overflow-wrap:anywhere}}
.prompt{{margin:0 0 1.2em;padding:.6em .9em;background:var(--surface);border-radius:6px;white-space:pre-wrap}}
.summary{{font-size:1.3em;margin:0 0 .4em;padding:.6em .9em;border-left:.3em solid var(--primary);
background:var(--surface)}}
.gap{{font-size:1.1em;margin:.8em 0 0}}
.scroll{{overflow-x:auto}}
table{{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}}
th,td{{padding:.4em .7em;border-bottom:1px solid var(--panel);text-align:left;white-space:nowrap}}
th{{border-bottom:2px solid var(--foreground)}}
.num{{text-align:right}}
tr.strong td{{font-weight:700}}
tr.dim td{{opacity:.6}}
.caption,.note{{opacity:.8;font-size:.9em;margin:.5em 0 0}}
svg{{display:block;width:100%;height:auto;font-family:inherit}}
svg text{{fill:var(--foreground);font-size:15px}}
svg .lane-name{{font-size:17px;font-weight:600}}
svg .tick,svg .end{{font-size:13px;opacity:.85}}
svg .part{{font-size:13px;fill:#fff;paint-order:stroke;stroke:#0008;stroke-width:2px}}
svg .grid{{stroke:var(--foreground);stroke-opacity:.15;stroke-width:1}}
.seg{{stroke:var(--background);stroke-width:.5}}
{segments}
.legend{{list-style:none;display:flex;flex-wrap:wrap;gap:.4em 1.4em;padding:0;margin:.6em 0 0}}
.legend li{{display:flex;align-items:center;gap:.4em}}
.legend .key{{width:.9em;height:.9em;display:inline}}
dl{{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1.2em;margin:0}}
dt{{font-weight:600}} dd{{margin:0}}
abbr{{text-decoration:none;cursor:help}}
code{{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.9em}}
footer{{margin-top:2.5em;opacity:.7;font-size:.85em;overflow-wrap:anywhere}}
@media print{{
:root{{--background:#FFFFFF;--foreground:#000000;--surface:#F2F2F2;--panel:#BBBBBB}}
*{{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
@page{{size:landscape;margin:12mm}}
body{{max-width:none;padding:0;font-size:10.5pt}}
section,table,svg,.summary{{break-inside:avoid}}
h2{{break-after:avoid}}
.seg{{stroke:#000;stroke-width:.6}}
.scroll{{overflow:visible}}
}}"""


def to_html(source: ExportSource, colours: Mapping[str, str] | None = None) -> str:
    """The whole page. ``colours`` are a theme's (``primary``, ``foreground``, ``background``, ``surface``,
    ``panel``, ``lane-0``…``lane-5``, ``seg-KIND``); what is missing or not ``#RRGGBB`` is :data:`NEUTRAL`'s."""
    result, runs = source.result, source.runs
    palette = _colours(colours)
    lanes = source.lanes(0)
    summary = tables.summary_pieces(summary_of_run(lanes))
    lead = f"{source.run_label(0).capitalize()} of {runs}: " if runs > 1 else ""
    facts = [escape(fact) for fact in source.facts()]
    if runs > 1:
        facts.append(f"{runs} runs (the table gives the median of each tier; the timeline {source.run_label(0)})")
    parts = [f"<header><h1>{escape(title(source))}</h1><p class=\"facts\">{' · '.join(facts)}</p>",
             f'<p class="prompt">{escape(source.prompt.strip())}</p></header>',
             f'<p class="summary">{escape(lead)}{sentence_html(summary)}</p>']
    line = tables.speedup_line(result, source.what_if) if source.loop is not None else None
    if line is not None:
        parts.append(f'<p class="gap">{escape(line)}</p>')
    parts.append(f"<section><h2>Results</h2>{table_html(tables.results_table(result, runs))}")
    note = tables.tokens_note(result)
    if note is not None:
        parts.append(f'<p class="note">{escape(note)}</p>')
    parts.append("</section>")
    kinds = [k for k in SEGMENT_KINDS
             if any(s.kind == k for i in range(len(lanes)) for s in result.metrics[i][0].segments)]
    parts.append(f"<section><h2>Timeline{escape(f' ({source.run_label(0)})' if runs > 1 else '')}</h2>"
                 f"{timeline_svg(source)}{legend(kinds)}</section>")
    if source.loop is not None:
        plain = tables.bottleneck_table(result, source.what_if, source.loop, runs)
        parts.append(f"<section><h2>{escape(plain.title)}</h2>{bottleneck_svg(source)}{table_html(plain)}"
                     "</section>")
    terms = dict(TABLE_TERMS)
    if source.loop is not None:
        terms.update({"Amdahl": "amdahl_max_speedup", "faster model": "what_if", "model": "model_share",
                      "breakdown": "breakdown"})
    definitions = "".join(f"<dt>{escape(name)} <code>{escape(key)}</code></dt><dd>{escape(DEFINITIONS[key])}</dd>"
                          for name, key in terms.items())
    parts.append(f"<section><h2>What the numbers mean</h2><dl>{definitions}</dl></section>")
    where = f" from {escape(source.file_name)}" if source.file else ""
    parts.append(f"<footer>Made by tokrace {escape(__version__)}{where}: the numbers are those of "
                 "<code>tokrace bench</code> and <code>tokrace replay FILE --headless</code>.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{escape(title(source))}</title>\n<style>\n{_css(palette)}\n</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")
