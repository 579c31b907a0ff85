"""OpenTelemetry SDK console dumps as traces: what Python's ``ConsoleSpanExporter`` prints, the concatenated
pretty JSON of ``ReadableSpan.to_json()`` (``name``, ``context.trace_id`` / ``span_id`` as ``0x`` hex,
``parent_id``, ISO ``start_time`` / ``end_time``, ``attributes`` as a plain object, ``events``, ``status``).

Each span is turned into its OTLP JSON shape and read as :mod:`.otlp` reads spans (GenAI semantic conventions,
OpenInference as a fallback). A dump often prints a span more than once: a span id seen twice counts once, with
a note. Text between the objects (log lines) is skipped and counted. The file is read a chunk at a time.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ..model.files import open_regular
from ..model.printable import deep_without_controls
from . import otlp
from .model import Trace
from .reader_tools import MAX_LINE, TraceError, iso_moment

NAME: Final[str] = "otel-sdk"
CHUNK: Final[int] = 1 << 20


def sniff_text(data: bytes) -> bool:
    """Whether the start of a file looks like a ``to_json`` dump: a span's ``context`` with a ``trace_id``."""
    return b'"context"' in data and b'"trace_id"' in data and b'"span_id"' in data and b'"start_time"' in data


def _nanos(value: Any) -> int | None:
    """Nanoseconds since the epoch from the SDK's ISO time (microseconds, ``Z``), without float rounding."""
    moment = iso_moment(value)
    if moment is None:
        return None
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _hex(value: Any) -> str:
    return value[2:] if isinstance(value, str) and value.startswith("0x") else str(value or "")


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": value}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def to_otlp(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A ``to_json`` span in its OTLP JSON shape; ``None`` when it is not a span."""
    context = obj.get("context")
    if not isinstance(context, dict) or "span_id" not in context:
        return None
    attrs = obj.get("attributes")
    status = obj.get("status")
    code = status.get("status_code") if isinstance(status, dict) else None
    events = []
    listed = obj.get("events")
    for ev in listed if isinstance(listed, list) else []:
        if isinstance(ev, dict):
            events.append({"name": ev.get("name"), "timeUnixNano": _nanos(ev.get("timestamp"))})
    return {"traceId": _hex(context.get("trace_id")), "spanId": _hex(context.get("span_id")),
            "parentSpanId": _hex(obj.get("parent_id")) if obj.get("parent_id") else "",
            "name": obj.get("name"), "startTimeUnixNano": _nanos(obj.get("start_time")),
            "endTimeUnixNano": _nanos(obj.get("end_time")),
            "attributes": [{"key": str(k), "value": _any_value(v)} for k, v in attrs.items()]
            if isinstance(attrs, dict) else [],
            "events": events, "status": {"code": 2 if code == "ERROR" else 0}}


def objects(path: Path, counts: dict[str, int]) -> Iterator[Any]:
    """The JSON values concatenated in a file, read a chunk at a time; text that is not JSON is skipped (and
    counted) up to the next line starting with ``{``; one value larger than the line limit ends the read."""
    decoder = json.JSONDecoder()
    try:
        fh = io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace")  # never a FIFO's block
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with fh:
        buf, at, eof = "", 0, False
        while True:
            while at < len(buf) and buf[at].isspace():
                at += 1
            if at >= len(buf) and eof:
                return
            if not eof and len(buf) - at < CHUNK:
                more = fh.read(CHUNK)
                eof = not more
                buf, at = buf[at:] + more, 0
                continue
            try:
                value, end = decoder.raw_decode(buf, at)
            except RecursionError:
                raise TraceError(f"{path}: nested too deeply to read") from None
            except json.JSONDecodeError:
                if not eof and len(buf) - at < MAX_LINE:
                    more = fh.read(max(CHUNK, len(buf)))  # an object cut by the chunk: read on (doubling)
                    eof = not more
                    buf, at = buf[at:] + more, 0
                    continue
                counts["skipped"] += 1  # not JSON: go on at the next object's start
                nxt = buf.find("\n{", at + 1)
                if nxt < 0:
                    buf, at = "", 0
                    if eof:
                        return
                    continue
                at = nxt + 1
                continue
            at = end
            yield deep_without_controls(value)  # names and ids are shown: never a command


def read(path: Path) -> Iterator[Trace]:
    """One trace per trace id in the dump."""
    traces: dict[str, dict[str, Any]] = {}
    counts = {"skipped": 0}
    for obj in objects(path, counts):
        for item in obj if isinstance(obj, list) else [obj]:
            raw = to_otlp(item) if isinstance(item, dict) else None
            if raw is None:
                counts["skipped"] += 1
                continue
            otlp.add_span(raw, traces, counts)
    notes = [f"skipped {counts['skipped']} value(s) that are not spans"] if counts["skipped"] else []
    yield from otlp.traces_of(path, traces, counts, notes, NAME)
