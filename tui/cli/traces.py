"""``tokrace traces PATH...``: read the agent traces people already have (files, or folders searched
recursively) and show where their time went: a table of the traces, a summary over the set with the six figures
of the checklist, and ``--json`` per docs/design.md §12. Files are read on every core (``--jobs``), reported in
order; a file of another kind is listed as "not a trace" and the rest go on. Exit 0 when at least one trace was
read, 2 when none."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.table import Table

from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.files import why_not_regular
from tokrace.providers.model.tiers import Price
from tokrace.providers.model.units import NOT_KNOWN, counted, duration, percent
from tokrace.providers.traces.analysis import IDLE_CAP_S, TraceAnalysis
from tokrace.providers.traces.compare import NO_PRICE, money, original_pricer, price_source, priced_analysis
from tokrace.providers.traces.model import Trace
from tokrace.providers.traces.read import FORMATS, Found, files, read_file
from tokrace.providers.traces.summary import SetSummary

from .tables import PIPED_WIDTH, err_console, print_table, surely_fits, write_text
from .tables import console as table_console
from .traces_common import add_jobs_option, file_json, price_arg, read_each

MAX_LANES: Final[int] = 6
"""The screen shows up to six lanes: a file with more traces plays its first six."""
DETAIL_UP_TO: Final[int] = 3
"""Up to this many traces, each gets a table of its own where its time went."""
DRAWN_TOGETHER: Final[int] = 32
"""The traces table's rows are drawn this many at a time as they come in (see :class:`TracesTable`)."""
KINDS: Final[tuple[str, ...]] = ("model", "tool", "human", "retry", "wait")
EXIT_OK, EXIT_NONE = 0, 2


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds of 0 or more, got {value}")
    return value


def add_traces_parser(sub: Any) -> None:
    """The ``traces`` subcommand."""
    p = sub.add_parser(
        "traces", help="read your own agent traces and show where their time went",
        description="Read agent traces (Claude Code sessions, Codex rollouts, Gemini CLI chat recordings, "
                    "OpenTelemetry GenAI exports and SDK console dumps, WEKA traces, tokrace recordings; the format "
                    "is found from each file's content) and show where "
                    "their time went: model, tool, human, retry, wait, summing to each trace's wall time. Folders "
                    "are searched recursively. Exit 0 when at least one trace was read, 2 when none.",
        epilog="Claude Code keeps sessions in ~/.claude/projects/, Codex in ~/.codex/sessions/, Gemini CLI in "
               "~/.gemini/tmp/<project hash>/chats/.")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="trace files or folders")
    p.add_argument("--json", metavar="FILE|-", dest="json_target", help="write the figures as JSON to FILE, or "
                   "to stdout with - (the tables are then left out)")
    p.add_argument("--idle-cap", type=_seconds, default=IDLE_CAP_S, metavar="S", dest="idle_cap",
                   help="a person's gap counts up to S seconds; the rest is away time, left out of the wall "
                        f"time (default {IDLE_CAP_S:.0f})")
    p.add_argument("--format", choices=FORMATS, metavar="NAME", dest="trace_format",
                   help=f"read every file as this format instead of detecting it ({', '.join(FORMATS)})")
    p.add_argument("--original-price", type=price_arg, metavar="IN,OUT[,CACHED[,WRITE]]", dest="original_price",
                   help="USD per million input, output (and cached input, cache-write) tokens, to price the "
                        "traces (cached and cache-write tokens at the input price when not given; default: the "
                        "price of a tier, configured or demo, with the trace's model)")
    add_jobs_option(p)
    from .traces_compare import add_compare_options

    add_compare_options(p)


def trace_json(trace: Trace, a: TraceAnalysis) -> dict[str, Any]:
    """One trace's object of the ``--json`` contract."""
    return {"file": trace.file, "format": trace.format, "session": trace.session, "skipped": trace.skipped,
            **a.to_json(), "notes": list(trace.notes)}


def _fmt_s(x: float | None) -> str:
    return duration(x, 1)  # one format in the whole column: "103.9 s" beside "127.0 s", never "2.1m"


def _pct(x: float | None) -> str:
    return percent(x)


def traces_table(rows: list[tuple[Trace, TraceAnalysis]], width: int = 120) -> Table:
    """A row per trace: its wall time and each kind's share of it (seconds are in the JSON and the detail)."""
    table = TracesTable()
    for trace, a in rows:
        table.add(trace, a)
    return table.table


class TracesTable:
    """:func:`traces_table` built a row at a time, as the traces come in (while the workers read the next files):
    each column's width kept as it goes (what Rich would measure over every row when the table is printed), and
    each row drawn at the widths so far, drawn again at the end only if a later row widened a column. After the
    last file, only the title, the header and the rows whose widths changed are left to draw; :meth:`print` writes
    byte for byte what Rich draws for the whole table."""

    def __init__(self, out: Console | None = None) -> None:
        self.table = table = self._table(title="traces: where the time went (share of the wall time)")
        table.add_column("trace", no_wrap=True)  # a file name is never cut: print_table stacks rows that cannot fit
        for col in ("format", "wall", "model", "tool", "human", "retry", "wait", "calls", "tools"):
            width = {"format": 11, "wall": 5}.get(col, 5)
            table.add_column(col, justify="left" if col == "format" else "right", no_wrap=True, min_width=width)
        self._out = out
        self._options = None if out is None else out.options.update_width(PIPED_WIDTH)
        self._widths: list[int] | None = None if out is None else [
            max(self._measure(str(c.header)), c.min_width or 0) for c in table.columns]
        self._drawn: list[tuple[list[tuple[str, ...]], list[int], list[Segment]]] = []
        """Runs of rows: their cells, their lines as Rich draws them in the table, the column widths they were drawn
        at."""
        self._waiting: list[tuple[str, ...]] = []
        """Rows not drawn yet: they are drawn :data:`DRAWN_TOGETHER` at a time (a table per row costs more than the
        whole table)."""

    @staticmethod
    def _table(**kwargs: Any) -> Table:
        return Table(title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, **kwargs)

    def _measure(self, cell: str) -> int:
        if _plain(cell):
            return len(cell)
        assert self._out is not None and self._options is not None
        return Measurement.get(self._out, self._options, cell).maximum

    def add(self, trace: Trace, a: TraceAnalysis) -> None:
        name = Path(trace.file).name
        if trace.session and trace.session not in name:
            name = f"{name} {trace.session[:12]}"
        cells = (escape(name), trace.format, _fmt_s(a.e2e_s),
                 *(_pct(a.breakdown[k] / a.e2e_s if a.e2e_s else None) for k in KINDS), str(a.calls),
                 str(a.tool_calls))
        self.table.add_row(*cells)
        if self._widths is None:
            return
        if "\t" in cells[0]:
            self._widths = None  # a tab is laid out when drawn: Rich measures and draws the table itself
            return
        self._widths = [max(w, self._measure(cell)) for w, cell in zip(self._widths, cells, strict=True)]
        self._waiting.append(cells)
        if len(self._waiting) >= DRAWN_TOGETHER:
            self._drawn.append((self._waiting, self._widths, self._draw(self._waiting, self._widths)))
            self._waiting = []

    def _draw(self, rows: Sequence[Sequence[str]], widths: list[int]) -> list[Segment]:
        """Rows' lines as the whole table draws them at ``widths``: a table of those rows alone, without its
        header and its edges (the other rows and the header change none of a row's lines)."""
        assert self._out is not None
        if self._out.color_system is None and all(_plain(cell) for cells in rows for cell in cells):
            # what Rich draws without colours: each cell justified to its column's width, a space after each but
            # the last (the padding without the edges), a space (the box's) between and around them
            last = len(widths) - 1
            return [Segment("".join(" " + " ".join(
                (cell.ljust(width) if column.justify == "left" else cell.rjust(width)) + " " * (i < last)
                for i, (cell, width, column) in enumerate(zip(cells, widths, self.table.columns, strict=True)))
                + " \n" for cells in rows))]
        alone = self._table(show_header=False)
        for column, width in zip(self.table.columns, widths, strict=True):
            alone.add_column(justify=column.justify, no_wrap=True, width=width)
        for cells in rows:
            alone.add_row(*cells)
        lines = self._out.render_lines(alone, self._out.options, pad=False, new_lines=True)
        return [segment for line in lines[1:-1] for segment in line]

    def finished(self) -> Table:
        """The table, each column as wide as Rich would measure it (it then measures none of its cells)."""
        if self._widths is not None:
            for column, width in zip(self.table.columns, self._widths, strict=True):
                column.width = width
        return self.table

    def print(self, out: Console) -> None:
        """:func:`.tables.print_table` of :meth:`finished`, its rows drawn as they came in when it fits ``out``."""
        table = self.finished()
        widths = self._widths
        if out is not self._out or widths is None or not (
                surely_fits(table, out.width) or
                Measurement.get(out, out.options.update_width(PIPED_WIDTH), table).maximum <= out.width):
            print_table(out, table)
            return
        head = self._table(title=table.title)
        for column in table.columns:
            head.add_column(column.header, justify=column.justify, no_wrap=True, width=column.width)
        lines = out.render_lines(head, out.options, pad=False, new_lines=True)  # title, header, bottom edge
        rows = [segment for cells, drawn_at, segments in [*self._drawn, (self._waiting, [], [])] if cells
                for segment in (segments if drawn_at == widths else self._draw(cells, widths))]
        out.print(Segments([segment for line in lines[:-1] for segment in line] + rows + lines[-1]))

def _plain(cell: str) -> bool:
    """Whether Rich draws ``cell`` as its characters, one cell each: printable ASCII without markup, emoji codes
    or escapes."""
    return cell.isascii() and cell.isprintable() and not any(c in cell for c in "[\\:")


def detail_table(trace: Trace, a: TraceAnalysis, approval: bool) -> Table:
    """One trace: each kind's seconds and share (``approval``: its tool steps include people's approvals), and
    what its format records."""
    table = Table(title=f"{escape(trace.file)} ({trace.format})", title_justify="left")
    table.add_column("where the time went")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for kind in KINDS:
        label = "tool (+approval)" if kind == "tool" and approval else kind
        table.add_row(label, f"{a.breakdown[kind]:.1f}", _pct(a.breakdown[kind] / a.e2e_s if a.e2e_s else None))
    table.add_row("[bold]wall time[/]", f"[bold]{a.e2e_s:.1f}[/]", "100%")
    if a.away_s:
        table.add_row("[dim]away (past the idle cap, left out)[/]", f"[dim]{a.away_s:.1f}[/]", "")
    beside = ", ".join(f"{k} {v:.1f}" for k, v in a.parallel_s.items() if v > 0.05)
    if beside:
        table.add_row("[dim]off the critical path (in parallel)[/]", f"[dim]{beside}[/]", "")
    ttft = "no TTFT recorded" if a.ttft_p50 is None else f"TTFT p50 {duration(a.ttft_p50)}"
    table.caption = escape(
        f"{counted(a.calls, 'model call')}, {counted(a.tool_calls, 'tool call')}, "
        f"{counted(a.human_steps, 'human step')}, {counted(a.retries, 'retry', 'retries')}; "
        f"tokens {tokens_text(a.input_tokens, a.cached_input_tokens, a.output_tokens)}; "
        f"model share {_pct(a.model_share)}, at most {_x(a.amdahl_max_speedup)} faster with an instant "
        f"model; {ttft}" + "".join(f"\n{n}" for n in trace.notes))
    table.caption_justify = "left"
    return table


def tokens_text(inp: int | None, cached: int | None, out: int | None) -> str:
    """Token counts as the tables print them: "not recorded" where the format has none (never 0)."""
    def one(n: int | None) -> str:
        return "not recorded" if n is None else f"{n:,}"

    if inp is None and out is None:
        return "not recorded"
    return f"{one(inp)} in ({'cached not recorded' if cached is None else f'{cached:,} cached'}), {one(out)} out"


def _x(value: float | None) -> str:
    return "∞×" if value is None else f"{value:.2f}×"


def summary_table(s: SetSummary, cap: float, price_from: str = NO_PRICE) -> Table:
    """The six figures of the checklist over the set; ``price_from`` says where the cost's price came from."""
    j = s.to_json()
    table = Table(title=f"summary over {s.traces} trace{'s' * (s.traces != 1)}", title_justify="left")
    table.add_column("compare before moving to a faster tier")
    table.add_column("value")
    cost = j["total_cost_usd"]
    rows = [
        ("total task time", f"{_fmt_s(j['total_task_s'])} (p50 {_fmt_s(j['task_s']['p50'])}, "
                            f"p90 {_fmt_s(j['task_s']['p90'])} per trace)"),
        ("total cost", f"{NOT_KNOWN if cost is None else money(cost)} (original price: {price_from})"),
        ("time to first token", "not recorded" if j["ttft_s"]["p50"] is None else
         f"p50 {duration(j['ttft_s']['p50'])}, p90 {duration(j['ttft_s']['p90'])}"),
        ("tool waits", f"{_fmt_s(j['tool_wait_s'])} ({_pct(j['tool_share'])})"),
        ("retry rate", NOT_KNOWN if j["retry_rate"] is None else f"{j['retry_rate']:.3f} per model call"),
        ("human review burden", f"{counted(j['human_steps'], 'step')}, {_fmt_s(j['human_review_s'])} "
                                f"({_pct(j['human_share'])}; gaps capped at {_fmt_s(cap)})"),
        ("model share", _pct(j["model_share"])),
        ("most a faster model could give (Amdahl)", _x(j["amdahl_max_speedup"])),
        ("tokens", tokens_text(j["input_tokens"], j["cached_input_tokens"], j["output_tokens"])),
    ]
    for what, value in rows:
        table.add_row(what, value)
    if s.away_s:
        table.add_row("[dim]away, left out of the wall time[/]", f"[dim]{_fmt_s(s.away_s)}[/]")
    if s.notes:
        table.caption = escape("what the traces do not record, and what was skipped:\n" + "\n".join(
            f"{note}" + (f" ({n} traces)" if n > 1 else "") for note, n in s.notes.items()))
        table.caption_justify = "left"
    return table


def _pricer(args: argparse.Namespace) -> tuple[Callable[[str | None], Price | None], dict[str, str]]:
    """How the traces' model calls are priced, as ``--on`` prices the original: ``--original-price``, else the
    tier (configured or demo) with the call's model; and which tier priced each model, in words."""
    from tokrace.providers.config.load import load_config

    from .traces_common import model_prices

    prices, sources = model_prices(load_config(getattr(args, "config", None)))
    return original_pricer(args.original_price, prices), sources


def cmd_traces(args: argparse.Namespace) -> int:
    from .traces_compare import cmd_compare, wants_compare

    if wants_compare(args):
        return cmd_compare(args)
    from .traces_export import check_targets, write_traces_exports

    target: str | None = args.json_target
    if target not in (None, "-") and not Path(target).parent.is_dir():
        raise TokraceError(f"{target}: cannot write the JSON (no folder {Path(target).parent})")
    markdown, csv_target = getattr(args, "markdown", None), getattr(args, "csv_target", None)
    check_targets(markdown, csv_target, target)
    piped = "-" in (target, markdown, csv_target)
    paths = list(files(args.paths))
    out = table_console(file=sys.stderr if piped else sys.stdout)
    err = err_console()
    summary = SetSummary()
    price_of, price_sources = _pricer(args)
    models: set[str] = set()
    traces_out: list[dict[str, Any]] = []
    traces_text: list[str] = []
    files_text: list[str] = []
    table = TracesTable(out)
    rows: list[tuple[Trace, TraceAnalysis]] = []
    approvals: list[bool] = []
    problems: list[Found] = []
    def digest(found: Found) -> tuple[Found, list[tuple[TraceAnalysis, bool]]]:
        """A file's traces analysed where it was read (a worker, with ``--jobs``), their steps let go."""
        out = []
        for trace in found.traces:
            out.append((priced_analysis(trace, args.idle_cap, price_of),
                        any(s.includes_approval for s in trace.steps if s.kind == "tool")))
            trace.steps = []  # the figures are kept, the steps let go: a folder never sits in memory
        return found, out

    # each result is made into its rows, its JSON and its cells as it comes in, while the workers read the next
    # files: after the last one, only the summary and the writing are left
    for found, analysed in read_each(paths, args.trace_format, err, "reading traces", digest,
                                     getattr(args, "jobs", 1)):
        if target is not None:
            files_text.append(_item_json(file_json(found)))
        if found.problem is not None:
            problems.append(found)
        for trace, (a, approval) in zip(found.traces, analysed, strict=True):
            models.update(a.models)
            summary.add(a)
            summary.note(trace.format, trace.notes)
            one = trace_json(trace, a)
            if csv_target is not None:
                traces_out.append(one)
            if target is not None:
                traces_text.append(_item_json(one))
            approvals.append(approval)
            rows.append((trace, a))
            table.add(trace, a)
    if target is not None:
        from tokrace.providers import __version__

        doc = {"tool": "tokrace", "version": __version__, "idle_cap_s": args.idle_cap, "traces": _TRACES,
               "files": _FILES, "summary": {"original": summary.to_json()}}
        write_text(_joined_json(doc, {_TRACES: traces_text, _FILES: files_text}), target, "the JSON")
    tables = []
    if rows:
        tables.append(table.finished())
        if len(rows) <= DETAIL_UP_TO:
            tables += [detail_table(trace, a, approval) for (trace, a), approval in zip(rows, approvals, strict=True)]
        price_from = NO_PRICE if summary.to_json()["total_cost_usd"] is None else \
            price_source(args.original_price, price_sources, models)
        tables.append(summary_table(summary, args.idle_cap, price_from))
    if not piped:  # the tables, unless stdout carries the JSON, the Markdown or the CSV
        for each in tables:
            if each is table.table:
                table.print(out)
            else:
                print_table(out, each)
    if rows:
        write_traces_exports(markdown, csv_target, tables, traces_out,
                             [(str(found.path), found.problem or "") for found in problems])
    for trace, _ in rows:
        if trace.skipped:
            print(f"{trace.file}: skipped {trace.skipped} unreadable line(s) or span(s)", file=sys.stderr)
    for found in problems:
        problem = found.problem or ""
        print(problem if problem.startswith(str(found.path)) else f"{found.path}: {problem}", file=sys.stderr)
    if not rows:
        print(f"tokrace: no trace read from {len(paths)} file{'s' * (len(paths) != 1)}", file=sys.stderr)
        return EXIT_NONE
    return EXIT_OK


@contextlib.contextmanager
def replayable(path: Path, idle_cap: float | None) -> Iterator[tuple[Path, bool]]:
    """The recording to replay for ``path``: itself when it is a tokrace recording, else a recording made from
    the traces in it (one lane per trace, up to the screen's six) in a temporary folder removed afterwards.
    The flag says whether it was converted."""
    from tokrace.providers.recording import FORMAT
    from tokrace.providers.traces.reader_tools import head, head_objects
    from tokrace.providers.traces.to_events import write_recording

    if (problem := why_not_regular(path)) is not None:
        raise TokraceError(f"{path}: {problem}")
    objects = head_objects(head(path), limit=1)
    if objects and objects[0].get("format") == FORMAT:
        yield path, False
        return
    found = read_file(path)
    if not found.traces:
        problem = found.problem or "no trace in it"
        if problem.startswith("not a trace"):
            raise TokraceError(f"{path}: neither a tokrace recording nor an agent trace tokrace reads")
        raise TokraceError(problem if problem.startswith(str(path)) else f"{path}: {problem}")
    traces = [t for t in found.traces if t.steps][:MAX_LANES]
    if not traces:
        raise TokraceError(f"{path}: its traces have no steps to play")
    if len(found.traces) > MAX_LANES:
        print(f"tokrace: {path} holds {len(found.traces)} traces; playing the first {MAX_LANES}", file=sys.stderr)
    cap = IDLE_CAP_S if idle_cap is None else idle_cap
    with tempfile.TemporaryDirectory(prefix="tokrace-trace-") as folder:
        yield write_recording(traces, Path(folder) / f"{path.stem}.jsonl", cap), True


_TRACES, _FILES = "\0traces", "\0files"
"""Stand-ins for the ``--json`` document's lists, whose items are written as they come in (see
:func:`_joined_json`)."""


def _item_json(obj: dict[str, Any]) -> str:
    """An item of one of the document's lists as :func:`json.dumps` writes it there (two levels in)."""
    return "    " + json.dumps(obj, indent=2, ensure_ascii=False).replace("\n", "\n    ")


def _joined_json(doc: dict[str, Any], lists: dict[str, list[str]]) -> str:
    """``json.dumps(doc, indent=2)`` with each stand-in string value of ``lists`` replaced by the list whose items
    :func:`_item_json` wrote: byte for byte what dumping the whole document writes, without its traces dumped
    again after the last file (a JSON string never holds a line break, so the items' lines indent safely).
    ``lists`` is in the document's order: each stand-in is put in place last to first, so that the first place
    its spelling takes is its own, whatever a file's content puts in the items."""
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    for stand_in, items in reversed(lists.items()):  # the last first: a stand-in's first place is its own
        spelled = json.dumps(stand_in)
        text = text.replace(spelled, "[\n" + ",\n".join(items) + "\n  ]" if items else "[]", 1)
    return text + "\n"
