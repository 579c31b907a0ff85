"""Reading traces: which format a file is (from its content, never its name), one reader per format, and the
files of a set of paths (folders searched recursively, one file at a time so a folder never sits in memory)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..model.files import not_regular
from . import claude_code, codex, gemini_cli, otel_sdk, otlp, tokrace_recording, weka
from .model import Trace
from .reader_tools import TraceError, head, head_objects

READERS: Final[dict[str, Callable[[Path], Iterator[Trace]]]] = {
    tokrace_recording.NAME: tokrace_recording.read,
    otlp.NAME: otlp.read,
    claude_code.NAME: claude_code.read,
    codex.NAME: codex.read,
    weka.NAME: weka.read,
    gemini_cli.NAME: gemini_cli.read,
    otel_sdk.NAME: otel_sdk.read,
}
"""Every format read, by the name ``--format`` takes."""

FORMATS: Final[tuple[str, ...]] = tuple(READERS)
SUFFIXES: Final[frozenset[str]] = frozenset({".json", ".jsonl", ".ndjson", ".jsonlines", ".otlp", ".txt", ""})
"""File endings a folder search considers (a file named explicitly is always tried)."""


def detect(path: Path) -> str | None:
    """The format of a file from its first 64 KB, or ``None`` when it is none of them."""
    data = head(path)
    objects = head_objects(data)
    if tokrace_recording.sniff(objects):
        return tokrace_recording.NAME
    if otlp.sniff_text(data):
        return otlp.NAME
    if codex.sniff(objects):
        return codex.NAME
    if claude_code.sniff(objects):
        return claude_code.NAME
    if weka.sniff_text(data):
        return weka.NAME
    if gemini_cli.sniff_text(data):
        return gemini_cli.NAME
    if otel_sdk.sniff_text(data):
        return otel_sdk.NAME
    return None


@dataclass(frozen=True, slots=True)
class Found:
    """What became of one file: its traces, or why it has none."""

    path: Path
    format: str | None
    traces: tuple[Trace, ...] = ()
    problem: str | None = None
    """Why no trace came of it: "not a trace", a read error, or "read with its session" for a sub-agent file."""


def read_file(path: Path, format: str | None = None) -> Found:
    """Every trace in one file; never raises for a bad file (the problem says what was wrong)."""
    try:
        if path.exists() and (kind := not_regular(path.stat().st_mode)):  # a FIFO or a device would block
            return Found(path, format, problem=f"{path}: cannot read it (it is {kind}, not a regular file)")
        if format is None and claude_code.parent_session(path) is not None:
            return Found(path, claude_code.NAME, problem=f"sub-agent of {claude_code.parent_session(path)}, "
                                                          "read with its session")
        name = format or detect(path)
        if name is None:
            return Found(path, None, problem=not_a_trace(path))
        traces = tuple(READERS[name](path))
    except TraceError as exc:
        return Found(path, format, problem=str(exc))
    except RecursionError:
        return Found(path, format, problem=f"{path}: nested too deeply to read as {format or 'a trace'}")
    except (MemoryError, ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # a reader met a shape nobody foresaw: the file is reported, the rest go on
        return Found(path, format, problem=f"{path}: cannot read it as {format or 'a trace'} "
                                           f"({type(exc).__name__}: {exc})")
    kept = tuple(t for t in traces if t.steps)
    if not kept:  # e.g. a session of summary lines only, or OTLP spans of HTTP calls alone
        return Found(path, name, problem="no agent steps in it (no model call, tool, person or agent recorded)")
    return Found(path, name, kept)


NOT_A_TRACE: Final[str] = "not a trace"
"""How every "not a trace" problem starts (the rest says what the file looked like)."""


def not_a_trace(path: Path) -> str:
    """Why a file is not read: the formats known, what the file looked like, and how to force one."""
    try:
        data = head(path)
    except TraceError:
        data = b""
    objects = head_objects(data, limit=1)
    if objects:
        keys = ", ".join(repr(k)[:40] for k in list(objects[0])[:6])
        looked = f"its first line is a JSON object with keys {keys}"
    elif data.lstrip()[:1] in (b"{", b"["):
        looked = "it starts as JSON, but not as any of them"
    else:
        looked = "it is not JSON"
    return (f"{NOT_A_TRACE}: {looked}; tokrace reads {', '.join(FORMATS)} (force one with --format NAME)")


def files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files to read: each file named, and every file under each folder named (recursively, sorted, hidden
    files and folders left out, only JSON-ish endings). A path that does not exist is yielded as it is, so its
    reader reports it."""
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path).parts
                if child.is_file() and not any(p.startswith(".") for p in rel) and child.suffix.lower() in SUFFIXES:
                    yield child
        else:
            yield path
