"""The listing commands: ``recordings``, ``tiers``, ``scenarios`` and ``themes``."""

from __future__ import annotations

import argparse

from .parser import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .screen import Screen


def cmd_recordings(args: argparse.Namespace, screen: Screen) -> int:
    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.model.units import duration
    from tokrace.providers.recording import list_recordings, recordings_dir

    from . import tables

    folder = args.dir or recordings_dir()
    infos = list_recordings(folder)
    console = tables.console()
    if not infos:
        console.print(f"no recordings in {folder}", highlight=False)
        return EXIT_OK
    table = Table(title=f"recordings in {folder}", title_justify="left")
    for col in ("when", "prompt", "tiers", "duration", "file"):  # the prompt may be cut, with an ellipsis
        table.add_column(col, no_wrap=col in ("when", "duration", "file"))
    for info in infos:  # every cell comes from a file: drawn as it is, never read as markup
        if info.problem:
            table.add_row("?", f"[red]{escape(info.problem)}[/]", "", "", escape(info.path.name))
            continue
        prompt = info.prompt if len(info.prompt) <= 60 else info.prompt[:59] + "…"
        took = duration(info.duration, 1) if info.duration is not None else ""
        if info.state:  # a race that did not run to its end replays only as far as it went
            took = f"{took} [bold yellow]{info.state}[/]".strip()
        table.add_row(escape(info.created.replace("T", " ")[:19]), escape(prompt), escape(", ".join(info.tiers)),
                      took, escape(info.path.name))
    tables.print_table(console, table)
    return EXIT_OK


def cmd_tiers(args: argparse.Namespace, screen: Screen) -> int:
    import os

    from rich.markup import escape
    from rich.table import Table

    from tokrace.providers.config.load import load_config
    from tokrace.providers.model.masking import mask_url, redact
    from tokrace.providers.model.presets import PRESETS

    from . import tables

    config = load_config(args.config)
    console = tables.console()
    source = "built-in offline demo (no config found)" if config.source is None else str(config.source)
    table = Table(title=f"tiers from {source}", title_justify="left")
    for col in ("name", "provider", "model", "endpoint", "key"):
        table.add_column(col, no_wrap=col != "key")
    for tier in config.tiers:
        if tier.provider in ("synthetic", "replay"):
            endpoint, key = ("offline", "not needed")
        else:
            from tokrace.providers.adapters import create_provider
            from tokrace.providers.adapters.http import HTTPProvider

            provider = create_provider(tier)  # an HTTP provider knows its endpoint and its default key variable
            http = provider if isinstance(provider, HTTPProvider) else None
            endpoint = mask_url(http.endpoint() if http is not None else tier.base_url or "")
            key_env = http.key_env if http is not None else tier.api_key_env
            present = "set" if key_env and os.environ.get(key_env) else "[red]not set[/]"
            key = f"{key_env} {present}" if key_env else "not needed"
        table.add_row(escape(tier.name), escape(tier.provider), escape(tier.model), escape(endpoint), key)
    tables.print_table(console, table)
    for broken in config.broken:  # the others still race (with --tiers); these are refused when selected
        # the error may echo a misplaced key back (a key given where a table belongs)
        tables.err_console().print(f"tokrace: {redact(str(broken.error), ())}", style="red", markup=False)
    presets = Table(title="presets (use preset = \"name\" in a tier)", title_justify="left")
    for col in ("preset", "protocol", "base URL", "key variable"):
        presets.add_column(col, no_wrap=True)
    for name, preset in PRESETS.items():
        presets.add_row(name, preset.provider, preset.base_url, preset.api_key_env or "none")
    tables.print_table(console, presets)
    return EXIT_USAGE if config.broken else EXIT_OK


def cmd_scenarios(args: argparse.Namespace, screen: Screen) -> int:
    from rich.table import Table

    from tokrace.providers.loop.scenario import HumanStep
    from tokrace.providers.loop.scenario_file import builtin_scenarios

    from . import tables

    table = Table(title="built-in scenarios (--scenario NAME)", title_justify="left")
    for col, justify in (("name", "left"), ("what happens", "left"), ("model requests", "right"),
                         ("tools", "left"), ("people", "right")):
        table.add_column(col, justify=justify, no_wrap=col in ("name", "model requests", "people"))  # type: ignore[arg-type]
    for sc in builtin_scenarios():
        people = sum(1 for step in sc.steps if isinstance(step, HumanStep))
        table.add_row(sc.name, sc.description, str(sc.model_steps), ", ".join(sc.tools), str(people))
    tables.print_table(tables.console(), table)
    return EXIT_OK


def cmd_themes(args: argparse.Namespace, screen: Screen) -> int:
    listing = screen.themes()
    width = max(len(name) for name in listing.origins)
    for name, origin in listing.origins.items():
        print(f"{name:<{width}}  {origin}")
    if not listing.problems:
        return EXIT_OK
    print("\nbroken theme files:")
    for problem in listing.problems:
        print(problem)
    return EXIT_FAILED
