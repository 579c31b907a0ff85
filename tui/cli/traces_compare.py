"""``tokrace traces PATH... --on TIER,TIER``: the traces re-timed on tiers and compared with the original, as a
terminal table led by the verdict, or ``--json``, ``--markdown``, ``--csv`` (docs/design.md §12)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tokrace.providers.model.errors import TokraceError
from tokrace.providers.model.files import why_not_regular
from tokrace.providers.model.tiers import Price

if TYPE_CHECKING:
    from tokrace.providers.config.load import Config
    from tokrace.providers.traces.compare import Comparer, Comparison
    from tokrace.providers.traces.model import Trace
    from tokrace.providers.traces.retime import TierProfile


def add_compare_options(p: argparse.ArgumentParser) -> None:
    """The options of ``tokrace traces`` that re-time and compare."""
    group = p.add_argument_group(
        "re-timing on tiers", "what would these traces have taken, and cost, on another tier? Each model call "
        "takes the tier's TTFT (+ input ÷ prefill_tok_s when set) + output tokens ÷ tok_s; tools, people, waits "
        "and retries keep their recorded time; parallel work stays parallel")
    group.add_argument("--on", metavar="TIER,TIER",
                       help="re-time the traces on these tiers (from the config, or the demo tiers) and compare "
                            "them with the original: synthetic tiers use their profile, HTTP tiers the one "
                            "`tokrace calibrate` measured")
    group.add_argument("--markdown", metavar="FILE|-", help="write the tables as GitHub-flavoured Markdown (with "
                       "--on: the comparison) to FILE, or to stdout with -")
    group.add_argument("--csv", metavar="FILE|-", dest="csv_target", help="write CSV to FILE, or to stdout with -: "
                       "one row per trace with the --json keys as headers (with --on: the comparison)")
    group.add_argument("--config", type=Path, metavar="FILE",
                       help="config file with the tiers (default: ./tokrace.toml, then the user config dir; the "
                            "built-in demo tiers when there is none)")
    group.add_argument("--seed", type=int, default=None, metavar="N",
                       help="seed of the bootstrap interval of each speed-up (default 15)")


def check_targets(*targets: str | None) -> None:
    """Refuse an output file in a folder that cannot be written, before any work is done."""
    for target in targets:
        if target not in (None, "-"):
            folder = Path(target).parent
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise TokraceError(f"{target}: cannot write it (no writable folder {folder})")


def profiles_for(config: Config, names: str) -> list[TierProfile]:
    """The profiles of the tiers named by ``--on``; a tier without a profile is an error saying how to get one."""
    from tokrace.providers.traces.compare import ORIGINAL
    from tokrace.providers.traces.retime import tier_profile

    tiers = config.select(names)
    if not tiers:
        raise TokraceError("--on: name at least one tier")
    seen = [t.name.lower() for t in tiers]
    for i, tier in enumerate(tiers):
        if seen[i] in seen[:i]:
            raise TokraceError(f"--on: {tier.name!r} is named twice")
        if seen[i] == ORIGINAL:
            raise TokraceError(f"--on: a tier named {tier.name!r} would be confused with the traces as recorded "
                               "(the original column); rename it in the config")
    return [tier_profile(t) for t in tiers]


def comparer_for(args: argparse.Namespace, config: Config, idle_cap_s: float) -> Comparer:
    """A comparison on the ``--on`` tiers, waiting for traces (every tier's profile is checked first)."""
    from tokrace.providers.traces.compare import BOOTSTRAP_SEED, Comparer

    from .traces_common import model_prices

    tier_prices, sources = model_prices(config)
    seed = BOOTSTRAP_SEED if getattr(args, "seed", None) is None else args.seed
    return Comparer(profiles_for(config, args.on), original_price=args.original_price, tier_prices=tier_prices,
                    idle_cap_s=idle_cap_s, seed=seed, price_sources=sources)


def build_comparison(traces: Sequence[Trace], args: argparse.Namespace, config: Config,
                     idle_cap_s: float) -> Comparison:
    """Re-time the traces on the ``--on`` tiers and compare them with the original."""
    if not traces:
        raise TokraceError("no traces to compare")
    comparer = comparer_for(args, config, idle_cap_s)
    for trace in traces:
        comparer.add(trace)
    return comparer.finish()


def cmd_compare(args: argparse.Namespace) -> int:
    """``tokrace traces PATH... --on TIERS``: read every file (one at a time, keeping only each trace's figures),
    re-time each trace on the tiers, and write the comparison. Exit 0 when a trace was read, 2 when none."""
    from rich.markup import escape

    from tokrace.providers.config.load import load_config
    from tokrace.providers.traces.compare import Measured
    from tokrace.providers.traces.read import Found, files

    from .tables import err_console
    from .traces_common import file_json, read_each

    check_compare_args(args)
    comparer = comparer_for(args, load_config(getattr(args, "config", None)), args.idle_cap)
    err = err_console()
    paths = list(files(args.paths))
    problems: list[Found] = []
    skipped: list[tuple[str, int]] = []
    files_out: list[dict[str, object]] = []
    def digest(found: Found) -> tuple[Found, list[Measured]]:
        """A file's traces measured where it was read (a worker, with ``--jobs``), their steps let go."""
        out = []
        for trace in found.traces:
            out.append(comparer.measure(trace))
            trace.steps = []  # the figures are kept, the steps let go
        return found, out

    for found, measured in read_each(paths, args.trace_format, err, "re-timing traces", digest,
                                     getattr(args, "jobs", 1)):
        files_out.append(file_json(found))
        if found.problem is not None:
            problems.append(found)
        for trace, figures in zip(found.traces, measured, strict=True):  # (one pickle: row.trace is trace)
            comparer.take(figures)
            if trace.skipped:
                skipped.append((trace.file, trace.skipped))
    for file, count in skipped:
        err.print(f"{escape(file)}: skipped {count} unreadable line(s) or span(s)")
    for found in problems:
        err.print(f"{escape(str(found.path))}: {escape(found.problem or '')}")
    if not comparer.rows:
        err.print(f"tokrace: no trace read from {len(paths)} file{'s' * (len(paths) != 1)}")
        return 2
    cmp = comparer.finish()
    cmp.unread = [(str(found.path), found.problem or "") for found in problems]
    write_comparison(cmp, args, files_out)
    return 0


def print_comparison(cmp: Comparison) -> None:
    """The comparison on the terminal: the verdict, the checklist table, the per-trace table, the notes."""
    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.traces.report import footnotes, table, trace_table

    from .tables import console as table_console
    from .tables import print_table

    console = table_console()
    console.print(f"[bold]{escape(cmp.verdict)}[/]", highlight=False)
    header, rows = table(cmp)
    checklist = Table(title_justify="left")
    for i, name in enumerate(header):
        checklist.add_column(escape(name), justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:
        checklist.add_row(*(escape(c) for c in row))
    print_table(console, checklist)
    if len(cmp.rows) > 1:
        header, rows = trace_table(cmp)
        per = Table(title="per trace", title_justify="left")
        for i, name in enumerate(header):
            per.add_column(escape(name), justify="left" if i < 2 else "right", no_wrap=True)
        for row in rows:
            per.add_row(*(escape(c) for c in row))
        print_table(console, per)
    for note in footnotes(cmp):
        console.print(f"[dim]{escape(note)}[/]", highlight=False)


def write_comparison(cmp: Comparison, args: argparse.Namespace,
                     files: Sequence[dict[str, object]] | None = None) -> None:
    """Print the comparison, or write the forms asked for (``--json``, ``--markdown``, ``--csv``; ``-`` is
    stdout, and then the terminal table is left out so the output can be piped)."""
    from tokrace.providers import __version__
    from tokrace.providers.traces.report import comparison_json, csv_text, markdown

    from .tables import write_text

    json_target = getattr(args, "json_target", None)
    targets = [t for t in (json_target, args.markdown, args.csv_target) if t is not None]
    if targets.count("-") > 1:
        raise TokraceError("only one of --json, --markdown and --csv can write to stdout (-)")
    if "-" not in targets:
        print_comparison(cmp)
    if json_target is not None:
        doc = comparison_json(cmp, __version__)
        if files is not None:
            doc["files"] = list(files)
        write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", json_target)
    if args.markdown is not None:
        write_text(markdown(cmp), args.markdown)
    if args.csv_target is not None:
        write_text(csv_text(cmp), args.csv_target)


def wants_compare(args: argparse.Namespace) -> bool:
    """Whether ``tokrace traces`` was asked for the comparison (``--on``, or an option only it takes; ``--markdown``
    and ``--csv`` alone write the plain analysis)."""
    return any(getattr(args, key, None) is not None for key in ("on", "seed", "config"))


def check_compare_args(args: argparse.Namespace) -> None:
    """Options that only make sense with ``--on``, and outputs that cannot be written, refused up front."""
    if args.on is None:
        for flag, value in (("--seed", args.seed), ("--config", args.config)):
            if value is not None:
                raise TokraceError(f"{flag} needs --on TIER,TIER (the tiers to compare the traces on)")
    check_targets(getattr(args, "json_target", None), args.markdown, args.csv_target)


def price_arg(text: str) -> Price:
    """``--original-price``, read when given: the trace readers behind it stay off the path of ``tokrace demo``."""
    from .traces_common import price_arg as parse

    return parse(text)


def add_replay_on_options(p: argparse.ArgumentParser) -> None:
    """``tokrace replay TRACE --on TIERS``: the original lane races one re-timed lane per tier."""
    group = p.add_argument_group(
        "a trace on other tiers", "with --on, an agent trace plays as its original lane racing one lane per tier, "
                                  "each re-timed on the tier's profile, on one clock, under the comparison's verdict")
    group.add_argument("--on", metavar="TIER,TIER",
                       help="re-time the trace on these tiers (from the config, or the demo tiers; up to five)")
    group.add_argument("--config", type=Path, metavar="FILE",
                       help="with --on: config file with the tiers (default: ./tokrace.toml, then the user "
                            "config dir; the demo tiers when there is none)")
    group.add_argument("--original-price", type=price_arg, metavar="IN,OUT[,CACHED[,WRITE]]", dest="original_price",
                       help="with --on: the original's price in USD per million input, output (and cached input, "
                            "cache-write) tokens (default: the price of a tier, configured or demo, with the "
                            "trace's model)")


ORIGINAL_LANE: Final[str] = "original"
"""The name of the trace's own lane when it races re-timed lanes."""


def write_race(trace: Trace, cmp: Comparison, original_price: Price | None, path: Path, idle_cap_s: float) -> Path:
    """A recording of the trace's original lane and one re-timed lane per tier, on one clock: the lanes are
    the trace's events (as ``tokrace replay TRACE`` plays them) as recorded and re-timed on each tier."""
    from tokrace.providers.model.tiers import TierSpec
    from tokrace.providers.recording import Recorder
    from tokrace.providers.traces.retime import retime_on
    from tokrace.providers.traces.to_events import trace_events

    models = ", ".join(cmp.rows[0].original.models)
    lanes = [(TierSpec(name=ORIGINAL_LANE, provider="replay", model=models, price=original_price,
                       options={"reference": True}), trace)]
    for profile in cmp.profiles:
        lanes.append((TierSpec(name=profile.name, provider="replay", model=profile.model or models,
                               price=profile.price), retime_on(trace, profile)))
    prompt = f"{Path(trace.file).name} ({trace.format} trace) on {', '.join(p.name for p in cmp.profiles)}"
    recorder = Recorder(path, prompt, [tier for tier, _ in lanes], scenario=f"{trace.format} trace",
                        extra={"trace": {"file": trace.file, "format": trace.format, "idle_cap_s": idle_cap_s},
                               "verdict": cmp.verdict})
    try:
        for lane, (_, moved) in enumerate(lanes):
            for event in trace_events(moved, idle_cap_s):
                recorder(lane, event)
    finally:
        recorder.close()
    return path


def replay_on(args: argparse.Namespace, play: Callable[[argparse.Namespace, Path, str | None], int],
              max_lanes: int) -> int:
    """``tokrace replay TRACE --on TIERS``: the trace's first trace compared on the tiers, played as a race of
    its original lane against one re-timed lane per tier, with the verdict shown above the lanes; the screen shows
    ``max_lanes`` lanes at most."""
    import tempfile

    from tokrace.providers.config.load import load_config
    from tokrace.providers.traces.analysis import IDLE_CAP_S
    from tokrace.providers.traces.read import read_file

    path: Path = args.file
    if (problem := why_not_regular(path)) is not None:
        raise TokraceError(f"{path}: {problem}")
    config = load_config(args.config)
    if len(config.select(args.on)) > max_lanes - 1:
        raise TokraceError(f"--on: the screen races up to {max_lanes} lanes, the original and "
                           f"{max_lanes - 1} tiers")
    cap = IDLE_CAP_S if args.idle_cap is None else args.idle_cap
    comparer = comparer_for(args, config, cap)
    found = read_file(path)
    traces = [t for t in found.traces if t.steps]
    if not traces:
        problem = found.problem or "its traces have no steps to play"
        raise TokraceError(problem if problem.startswith(str(path)) else f"{path}: {problem}")
    if len(traces) > 1:
        print(f"tokrace: {path} holds {len(traces)} traces; --on races the first", file=sys.stderr)
    trace = traces[0]
    comparer.add(trace)
    cmp = comparer.finish()
    args.idle_cap = None  # the cap is spent cutting away time out of the lanes
    price = args.original_price or comparer.tier_prices.get(next(iter(cmp.rows[0].original.models), ""))
    with tempfile.TemporaryDirectory(prefix="tokrace-trace-") as folder:
        return play(args, write_race(trace, cmp, price, Path(folder) / f"{path.stem}-on.jsonl", cap), cmp.verdict)
