"""A race as GitHub-flavoured Markdown: the summary sentence, bench's table, the bottleneck table of a loop and
what the numbers mean, with the very cells ``tokrace bench`` prints (:mod:`tokrace.providers.export.tables`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ..metrics.turn import DEFINITIONS
from ..model.printable import one_line
from ..race.summary import summary_of_run
from . import tables
from .race_data import ExportSource

_SPECIAL: Final[re.Pattern[str]] = re.compile(r"([\\`*_\[\]<>|#~])")
"""Characters Markdown (or a GFM table) would read as markup."""

TABLE_TERMS: Final[dict[str, str]] = {"TTFT": "ttft_s", "decode tok/s": "decode_tok_s", "e2e": "e2e_s",
                                      "tokens": "output_tokens", "cost": "cost_usd"}
"""The results table's columns and the metric each shows (docs/design.md §6), for the definitions under it."""


def text(value: str) -> str:
    """Plain text as Markdown that shows it as it is, on one line."""
    return _SPECIAL.sub(r"\\\1", re.sub(r"\s+", " ", one_line(value)))


def table(plain: tables.Table) -> list[str]:
    """A plain table as a GFM table: numbers right-aligned, the strong row bold, a dim row in italics."""
    lines = ["| " + " | ".join(text(c.name) for c in plain.columns) + " |",
             "|" + "|".join("---:" if c.right else ":---" for c in plain.columns) + "|"]
    for row in plain.rows:
        cells = [text(cell) for cell in row.cells]
        if row.strong:
            cells = [f"**{cell}**" if cell else cell for cell in cells]
        elif row.dim:
            cells = [f"*{cell}*" if cell else cell for cell in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def sentence(pieces: Sequence[tuple[str, str]]) -> str:
    """Styled pieces (the race screen's summary) as Markdown: bold pieces bold."""
    out = []
    for piece, style in pieces:
        body = piece.strip()
        if "bold" in style and body:
            lead, trail = piece[: len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()):]
            out.append(f"{lead}**{text(body)}**{trail}")
        else:
            out.append(text(piece) if piece.strip() else piece)
    return "".join(out)


TITLE_CHARS: Final[int] = 80
"""A prompt longer than this is cut in a title (it is given whole under it)."""


def title(source: ExportSource) -> str:
    """What the race raced, in a heading's words: the loop's name, or the prompt (cut when long)."""
    if source.loop:
        return f"tokrace: {source.loop}"
    prompt = " ".join(source.prompt.split())
    return f"tokrace: {prompt if len(prompt) <= TITLE_CHARS else prompt[:TITLE_CHARS - 1] + '…'}"


def summary_line(source: ExportSource) -> str:
    """The race screen's summary of the first run exported, named as such when there are several runs."""
    pieces = tables.summary_pieces(summary_of_run(source.lanes(0)))
    lead = f"{source.run_label(0).capitalize()} of {source.runs}: " if source.runs > 1 else ""
    return lead + sentence(pieces)


def to_markdown(source: ExportSource) -> str:
    """The whole document."""
    result, runs = source.result, source.runs
    lines = [f"## {text(title(source))}", ""]
    facts = [text(fact) for fact in source.facts()]
    if runs > 1:
        facts.append(f"{runs} runs")
    facts.append(f"prompt: {text(source.prompt.strip())}")
    lines += [" · ".join(facts), "", summary_line(source), ""]
    lines += table(tables.results_table(result, runs))
    note = tables.tokens_note(result)
    if note is not None:
        lines += ["", f"*{text(note)}*"]
    if source.loop is not None:
        plain = tables.bottleneck_table(result, source.what_if, source.loop, runs)
        lines += ["", f"### {text(plain.title)}", ""]
        lines += table(plain)
        lines += ["", f"*{text(plain.caption)}*"]
        line = tables.speedup_line(result, source.what_if)
        if line is not None:
            lines += ["", text(line)]
    lines += ["", "<details><summary>What the numbers mean</summary>", ""]
    terms = dict(TABLE_TERMS)
    if source.loop is not None:
        terms.update({"Amdahl": "amdahl_max_speedup", "faster model": "what_if", "model": "model_share"})
    lines += [f"- **{text(name)}** (`{key}`): {text(DEFINITIONS[key])}" for name, key in terms.items()]
    lines += ["", "</details>", ""]
    return "\n".join(lines)
