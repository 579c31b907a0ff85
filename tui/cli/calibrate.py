"""``tokrace calibrate``: measure HTTP tiers (TTFT and decode rate, median and spread over a few short requests)
and write each profile next to its tier in the config, or print it as TOML lines to paste (docs/design.md §12)."""

from __future__ import annotations

import argparse
import asyncio
import datetime
from pathlib import Path
from typing import Any

from tokrace.providers.model.errors import TokraceError

EXIT_OK, EXIT_FAILED = 0, 1


def add_calibrate_parser(sub: Any, positive_int: Any) -> None:
    """The ``calibrate`` subcommand and its options."""
    from tokrace.providers.race.calibrate import CALIBRATION_MAX_TOKENS

    p = sub.add_parser(
        "calibrate", help="measure HTTP tiers' TTFT and decode rate into profiles for re-timing traces",
        description="Send each HTTP tier a few short requests, one after another (after one unmeasured warm-up "
                    "request that opens the connection), and measure its time to first token (from the request "
                    "being on the wire, as the server and the network take it) and decode rate: "
                    "the median over the runs, with the 10th-90th percentile spread. The profile (ttft_ms, "
                    "tok_s) is written into the tier's [[tiers]] table in the config file, keeping everything "
                    "else in the file, so `tokrace traces PATH --on TIER` can re-time traces on a real tier. "
                    "Each run costs one short answer on the tier's account.")
    p.add_argument("--tiers", required=True, metavar="NAME,NAME", help="the HTTP tiers to measure")
    p.add_argument("--runs", type=positive_int, default=5, metavar="N",
                   help="measured requests per tier (default 5)")
    p.add_argument("--max-tokens", type=positive_int, default=CALIBRATION_MAX_TOKENS, metavar="N",
                   help=f"output tokens per request (default {CALIBRATION_MAX_TOKENS})")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print each profile as the TOML lines to paste instead of writing the config")
    p.add_argument("--config", type=Path, metavar="FILE", help="config file (default: ./tokrace.toml, then the "
                   "user config dir)")


def cmd_calibrate(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.config.load import load_config
    from tokrace.providers.race.calibrate import (
        Calibration,
        CalibrationError,
        calibrate,
        check_calibratable,
        write_profile,
    )

    config = load_config(args.config)
    tiers = config.select(args.tiers)
    for tier in tiers:
        check_calibratable(tier)
    if config.source is None and not args.print_only:
        raise CalibrationError("no config file to write the profiles to; use --print, or --config FILE")
    from .tables import err_console

    err = err_console()
    results: list[Calibration] = []
    for tier in tiers:
        err.print(f"calibrating {tier.name} ({args.runs} run{'s' if args.runs != 1 else ''} after a warm-up)…")
        try:
            results.append(asyncio.run(calibrate(tier, args.runs, max_tokens=args.max_tokens)))
        except TokraceError as exc:
            results.append(Calibration(tier=tier.name, runs=args.runs, errors=[str(exc)]))
    out = Console(highlight=False)
    table = Table(title="calibration (median of the runs; spread = 10th-90th percentile)", title_justify="left")
    for col in ("tier", "runs ok", "TTFT p50", "TTFT spread", "decode p50", "decode spread"):
        table.add_column(col, justify="left" if col == "tier" else "right")
    for r in results:
        if not r.ok:
            table.add_row(escape(r.tier), f"0/{r.runs}", "-", "-", "-", "-")
            continue
        lo, hi = r.spread(r.ttft_s)
        dlo, dhi = r.spread(r.decode_tok_s)
        table.add_row(escape(r.tier), f"{len(r.ttft_s)}/{r.runs}", f"{r.ttft_ms:g} ms",
                      f"{lo * 1000:.0f}-{hi * 1000:.0f} ms", f"{r.tok_s:g} tok/s", f"{dlo:.0f}-{dhi:.0f} tok/s")
    out.print(table)
    failed = False
    today = datetime.date.today().isoformat()
    for tier, r in zip(tiers, results, strict=True):
        for error in dict.fromkeys(r.errors):
            err.print(f"{r.tier}: {error}", markup=False)
        if not r.ok:
            failed = True
            err.print(f"{r.tier}: no successful run; its profile is unchanged", markup=False)
            continue
        lo, hi = r.spread(r.ttft_s)
        dlo, dhi = r.spread(r.decode_tok_s)
        note = (f"on {today}, {len(r.ttft_s)} runs: TTFT {lo * 1000:.0f}-{hi * 1000:.0f} ms, "
                f"decode {dlo:.0f}-{dhi:.0f} tok/s (10th-90th percentile)")
        if args.print_only:
            out.print(f"# {tier.name}: paste into its [[tiers]] table", markup=False)
            out.print("\n".join(r.toml_lines()), markup=False)
            continue
        assert config.source is not None
        index = config.tiers.index(tier)
        try:
            lines = write_profile(config.source, index, r, note)
        except CalibrationError as exc:
            failed = True
            err.print(f"{exc}; paste these lines into the tier's table yourself:", markup=False)
            out.print(f"# {tier.name}\n" + "\n".join(r.toml_lines()), markup=False)
            continue
        out.print(f"{tier.name}: wrote {', '.join(r.toml_lines())} to {config.source} "
                  f"(line{'s' if len(lines) != 1 else ''} {lines[0]}-{lines[-1]})", markup=False)
    return EXIT_FAILED if failed else EXIT_OK
