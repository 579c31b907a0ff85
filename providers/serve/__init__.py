"""``tokrace serve``: a latency-faithful loopback server speaking the three protocols, and its wire writers."""

from .faults import FAULT_HEADER, FAULT_KINDS, Fault, ServeError
from .request import MAX_BODY, Limits
from .served import Served
from .server import ServeServer
from .sources import RecordingSource, Source, SyntheticSource
from .wire import FLAVORS

__all__ = [
    "FAULT_HEADER",
    "FAULT_KINDS",
    "FLAVORS",
    "MAX_BODY",
    "Fault",
    "Limits",
    "RecordingSource",
    "ServeError",
    "ServeServer",
    "Served",
    "Source",
    "SyntheticSource",
]
