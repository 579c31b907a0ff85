"""The kernel's socket time stamps: when a packet arrived (receive stamps) and when sent bytes left (transmit stamps).

Shared by the HTTP backend, which stamps what it reads and sends, and by ``tokrace serve``, which stamps what it writes.
"""

from __future__ import annotations

import collections
import socket
import struct
import sys
import time
from typing import Final

SO_TIMESTAMPNS: Final[int] = 35
"""Linux's socket option (and control message type) for nanosecond receive timestamps (CLOCK_REALTIME)."""

TIMESPEC: Final[struct.Struct] = struct.Struct("@ll")
"""The kernel's ``struct timespec`` (seconds, nanoseconds) in an ``SO_TIMESTAMPNS`` control message."""


def packet_time(ancillary: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's arrival time of the packet a ``recvmsg`` just read (its ``SO_TIMESTAMPNS`` control message), as a
    ``perf_counter()`` value; ``None`` when the kernel sent none."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
            sec, nsec = (int(x) for x in TIMESPEC.unpack_from(raw))
            return kernel_time(sec, nsec)
    return None


READING_SPAN_NS: Final[int] = 20_000
"""Two readings of the clocks this close together (ns) were taken with nothing in between (typically < 1 µs)."""

READING_TRIES: Final[int] = 5


def kernel_time(sec: int, nsec: int) -> float:
    """A kernel stamp (``CLOCK_REALTIME``, as sockets give them) as a ``perf_counter()`` value (the stamp plus how far
    ``perf_counter`` is ahead of the real-time clock), never later than now.

    How far the two clocks are apart is read between two ``perf_counter`` readings, and read again when those are far
    apart: a thread held between its two readings (the OS giving a busy core to another thread or process) would
    otherwise move the stamp by as long as it was held, tens of milliseconds on a busy box."""
    best = READING_SPAN_NS * 1_000_000
    offset = after = 0
    for _ in range(READING_TRIES):
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        if after - before < best:
            best, offset = after - before, before + (after - before) // 2 - real
            if best <= READING_SPAN_NS:
                break
    # integers: no float rounding
    return min(sec * 1_000_000_000 + nsec + offset, after) / 1e9


SO_TIMESTAMPING: Final[int] = 37
"""Linux's socket option (and control message type) for the kernel's transmit (and receive) timestamps."""

SEND_STAMPS: Final[int] = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
"""``SOF_TIMESTAMPING_TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY``: a software stamp of each send's last byte as it
goes to the network device (on loopback: as the peer's socket gets it), read back from the socket's error queue,
keyed by that byte's offset in the stream since the option was set, with no copy of the bytes."""

_STAMPING: Final[struct.Struct] = struct.Struct("@llllll")
"""``struct scm_timestamping``: three timespecs, the first the software stamp."""

_EXTENDED_ERR: Final[struct.Struct] = struct.Struct("=IBBBBII")
"""``struct sock_extended_err``: errno, origin, type, code, pad, info, data (a stamp's key)."""

_ORIGIN_TIMESTAMPING: Final[int] = 4
_TSTAMP_SND: Final[int] = 0
_ERRQUEUE_SPACE: Final[int] = socket.CMSG_SPACE(_STAMPING.size) + socket.CMSG_SPACE(_EXTENDED_ERR.size) \
    + socket.CMSG_SPACE(TIMESPEC.size)
"""Room for a transmit stamp's control messages (and the ``SO_TIMESTAMPNS`` copy a socket that has both gets)."""


def send_stamps(sock: socket.socket) -> list[tuple[int, float]]:
    """The transmit stamps queued on ``sock``'s error queue (:data:`SEND_STAMPS`), oldest first, taken off it: for
    each, the offset of the last byte its send carried (modulo 2**32, as the kernel keys them) and when that byte
    went to the network device, as a ``perf_counter()`` value."""
    stamps: list[tuple[int, float]] = []
    while True:
        try:
            _, ancillary, _, _ = sock.recvmsg(0, _ERRQUEUE_SPACE, _MSG_ERRQUEUE | MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return stamps
        except OSError:  # (a socket that cannot say: as good as none)
            return stamps
        when: float | None = None
        key: int | None = None
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(raw) >= _STAMPING.size:
                sec, nsec = _STAMPING.unpack_from(raw)[:2]
                when = kernel_time(sec, nsec) if sec or nsec else None
            elif len(raw) >= _EXTENDED_ERR.size and level != socket.SOL_SOCKET:  # IP_RECVERR, IPV6_RECVERR
                _, origin, _, _, _, info, data = _EXTENDED_ERR.unpack_from(raw)
                if origin == _ORIGIN_TIMESTAMPING and info == _TSTAMP_SND:
                    key = data
        if when is not None and key is not None:
            stamps.append((key, when))


_KEYS: Final[int] = 1 << 32
"""Transmit stamps are keyed by a byte's offset modulo this (the kernel's 32-bit key)."""


class SendStamps:
    """When the bytes sent on a TCP socket went out, by the kernel's transmit stamps (:data:`SEND_STAMPS`): the
    sender counts what it sends (:meth:`sent`); :meth:`time_of` says when a byte went to the network device."""

    __slots__ = ("_stamps", "sock", "total")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.total = 0
        """Bytes sent since the stamps were switched on."""
        self._stamps: collections.deque[tuple[int, float]] = collections.deque(maxlen=1024)
        """Transmit stamps taken off the error queue and not yet passed by: (last byte's key, when)."""

    @classmethod
    def on(cls, sock: socket.socket) -> SendStamps | None:
        """Switch transmit stamps on for a connected TCP ``sock`` with nothing sent yet (Linux; else ``None``)."""
        if sys.platform != "linux" or sock.family not in (socket.AF_INET, socket.AF_INET6) \
                or sock.type != socket.SOCK_STREAM:
            return None
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, SEND_STAMPS)
        except OSError:
            return None
        return cls(sock)

    def sent(self, count: int) -> None:
        """``count`` more bytes were sent; take the stamps already there off the error queue (on loopback a send's
        stamp is there as the call returns), which a socket watched for errors would otherwise report again."""
        self.total += count
        self.collect()

    def collect(self) -> None:
        self._stamps.extend(send_stamps(self.sock))

    def time_of(self, end: int) -> float | None:
        """When the byte before offset ``end`` (``end`` bytes sent in all) went out, by the stamp of the send that
        carried it; ``None`` when the kernel has not stamped it (yet)."""
        if end <= 0:
            return None
        stamps = self._stamps
        stamps.extend(send_stamps(self.sock))
        key = (end - 1) % _KEYS
        while stamps:
            stamped, when = stamps[0]
            if (stamped - key) % _KEYS < _KEYS // 2:  # this send carried that byte (or went out with it)
                return when
            stamps.popleft()  # an earlier send's: nobody asks about it any more
        return None


MSG_DONTWAIT: Final[int] = getattr(socket, "MSG_DONTWAIT", 0)
_MSG_ERRQUEUE: Final[int] = getattr(socket, "MSG_ERRQUEUE", 0x2000)
