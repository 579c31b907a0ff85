"""The faults ``tokrace serve`` injects on demand (``--fault``, or a header for one request), and the error for what
it cannot do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..model.errors import TokraceError

FAULT_KINDS: Final[dict[str, str]] = {
    "http": "answer with this HTTP status and the protocol's JSON error (http=429)",
    "error": "send the protocol's error event mid-stream",
    "reset": "reset the connection mid-stream",
    "truncate": "end the stream cleanly but without its final event",
    "malformed": "send a frame whose JSON is cut off",
    "non-utf8": "send a frame with bytes that are not UTF-8",
    "stall": "stop sending mid-stream: pause for stall=S seconds and go on with the answer, or (no S) until the "
             "client gives up",
}
"""The faults ``--fault`` can inject, with what each does."""

FAULT_HEADER: Final[str] = "x-tokrace-fault"
"""A request header that asks for a fault on that request only (same syntax as ``--fault``)."""


class ServeError(TokraceError):
    """``tokrace serve`` was asked for something it cannot do."""


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault to inject: ``kind``, after how many pieces of text, on how many requests."""

    kind: str
    status: int = 500
    after: int = 3
    times: int | None = None
    """Only the first ``times`` requests that ask for this fault get it (``None``: all of them)."""
    retry_after: float | None = None
    stall_s: float | None = None

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``kind[=value][,after=N][,times=N][,retry_after=S]``, e.g. ``http=429,retry_after=0.5,times=1``."""
        parts = [p.strip() for p in spec.replace(" ", ",").split(",") if p.strip()]
        if not parts:
            raise ServeError("empty fault spec")
        kind, _, value = parts[0].partition("=")
        if kind not in FAULT_KINDS:
            raise ServeError(f"unknown fault {kind!r} (known: {', '.join(FAULT_KINDS)})")
        args: dict[str, Any] = {"kind": kind}
        try:
            if kind == "http":
                args["status"] = int(value or 500)
                if not 400 <= args["status"] <= 599:
                    raise ValueError
            elif kind == "stall" and value:
                args["stall_s"] = float(value)
            for part in parts[1:]:
                key, _, val = part.partition("=")
                if key in ("after", "times"):
                    args[key] = int(val)
                elif key == "retry_after":
                    args[key] = float(val)
                else:
                    raise ServeError(f"unknown fault option {key!r} in {spec!r} (after, times, retry_after)")
        except ValueError:
            raise ServeError(f"bad fault spec {spec!r}: expected e.g. http=429,retry_after=0.5 or "
                             "reset,after=10 (http takes a status from 400 to 599)") from None
        return cls(**args)

