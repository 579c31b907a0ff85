"""What ``tokrace proxy`` adds, direct vs proxied on loopback, interleaved (docs/performance.md):

- time to the first byte of the answer, added (p50, p99) over N requests each way, each way on one kept-alive
  connection (as an agent's SDK keeps one);
- per-chunk forwarding delay (p99) at 750 and 12,000 chunks a second, two ways. Paired: the upstream writes each
  chunk to a direct and a proxied connection back to back, carrying its send time (the real-time clock), and the
  client takes each chunk's kernel arrival stamp on both; the added delay is the proxied arrival less the direct
  one, chunk by chunk (the upstream's own gap between its two writes is in it). At the wire, where the process may
  capture packets (Linux, root or CAP_NET_RAW): the kernel's stamp of each chunk as it crossed the loopback device
  into the proxy and out of it to the client, from a packet capture, so nothing but the proxy is in it; with
  ``socat`` installed, the same for socat, a relay in C that only copies: the box's own floor for any relay;
- the proxy's CPU per 1,000 chunks (its process's user + system time);
- the proxy's RSS after a session of M calls with 4 MB request bodies (recording on);
- ``tokrace serve``'s time to first token against its plan (``--ttft-ms 100``) with 400 KB request bodies, each body
  new and each the same conversation again (as an agent sends it).

The upstream and the proxy run in processes of their own; the client is this one. Each goal of issue 25 is a
printed ``goal`` line (met or not), and the first line says the conditions (cores, load average): the per-chunk
figures move with the box's load, which the direct path's own p99 shows. Usage:
``python scripts/bench_proxy.py [--requests 200] [--big-calls 1000] [--serve-requests 20]`` (``--big-calls 0``
leaves out the RSS run, about 90 s)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import select
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)

UPSTREAM = r'''
import asyncio, sys, time
PAIRS = {}
async def stream(writers, chunks, rate):
    for w in writers:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    start = time.perf_counter()
    for i in range(chunks):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            await asyncio.sleep(due - now)  # (late wakes send a burst, as real upstreams do; each chunk is stamped)
        data = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
                b'{"type":"text_delta","text":"%d"}}\n\n' % time.time_ns())  # read by the proxy as a token
        chunk = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        for w in (writers if i % 2 else writers[::-1]):  # each path first every other chunk
            w.write(chunk)
    for w in writers:
        w.write(b"0\r\n\r\n")
        await w.drain()
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            query = head.split(b" ", 2)[1].partition(b"?")[2].decode()
            opts = dict(p.split("=") for p in query.split("&") if "=" in p)
            chunks, rate = int(opts.get("chunks", "0")), float(opts.get("rate", "1000"))
            pair = opts.get("pair")
            if pair is None:
                await stream([writer], chunks, rate)
                continue
            waiting = PAIRS.setdefault(pair, [])
            waiting.append(writer)
            if len(waiting) == 2:  # both paths asked: one stream, each chunk written to both back to back
                del PAIRS[pair]
                await stream(waiting, chunks, rate)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
'''

STAMP = re.compile(rb'"text":"(\d+)"')

ETH_P_ALL = 3
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_STATISTICS = 6
PACKET_OUTGOING = 4
SO_ATTACH_FILTER = 26
SO_RCVBUFFORCE = 33
WITH_PAYLOAD = [(0x28, 0, 0, 12), (0x15, 0, 3, 0x0800), (0x80, 0, 0, 0), (0x25, 0, 1, 100), (0x06, 0, 0, 1 << 18),
                (0x06, 0, 0, 0)]
"""A classic BPF program: IPv4 frames over 100 bytes, whole (a TCP segment with a payload, not a bare ACK)."""


class Wire:
    """Every IPv4 packet with a payload that crosses the loopback device from now on, each with the kernel's stamp of
    the moment it did (taken in the sender's ``send``, as the receiving socket gets it): an ``AF_PACKET`` capture,
    kept in the kernel until :meth:`take` reads it."""

    def __init__(self) -> None:
        import ctypes

        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        program = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *op) for op in WITH_PAYLOAD))
        self._program = program
        self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                             struct.pack("HL", len(WITH_PAYLOAD), ctypes.addressof(program)))
        with contextlib.suppress(OSError):
            self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)  # each packet once, as received
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)
        except OSError:  # CAP_NET_RAW without CAP_NET_ADMIN: the system's cap, read every few ms
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(("lo", 0))
        self.sock.setblocking(False)
        self.packets: list[tuple[int, int, int, bytes]] = []

    def take(self) -> None:
        """Read what the kernel kept: (its stamp in ns, source port, destination port, payload) each."""
        while True:
            try:
                data, ancillary, _, address = self.sock.recvmsg(1 << 18, socket.CMSG_SPACE(16))
            except BlockingIOError:
                return
            if address[2] == PACKET_OUTGOING or len(data) < 34 or data[23] != socket.IPPROTO_TCP:
                continue
            stamp = next((int.from_bytes(raw[:8], "little") * 10**9 + int.from_bytes(raw[8:16], "little")
                          for _, kind, raw in ancillary if kind == SO_TIMESTAMPNS), 0)
            ip = 14 + (data[14] & 15) * 4
            source, target = struct.unpack_from("!HH", data, ip)
            self.packets.append((stamp, source, target, data[ip + (data[ip + 12] >> 4) * 4:]))

    def dropped(self) -> int:
        return int(struct.unpack("II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1])

    def close(self) -> None:
        self.sock.close()


def can_capture() -> str:
    """Why the wire figures cannot be taken here, or ``""``."""
    if not sys.platform.startswith("linux"):
        return "a packet capture needs Linux"
    try:
        Wire().close()
    except PermissionError:
        return "a packet capture needs root or CAP_NET_RAW"
    except OSError as exc:
        return f"no packet capture ({exc})"
    return ""


def at_the_wire(up_port: int, proxy_port: int, chunks: int, rate: float) -> tuple[list[float], int]:
    """Each chunk's forwarding delay through the relay on ``proxy_port``: the kernel's stamp of its packet out of
    the relay to the client less that of its packet from the upstream into the relay. The client reads every 5 ms
    (its stamps play no part), so it takes the relay's cores as little as it can. Also the packets the kernel could
    not keep (their chunks are left out)."""
    wire = Wire()
    try:
        sock = socket.create_connection(("127.0.0.1", proxy_port))
        sock.sendall(f"POST /v1/messages?chunks={chunks}&rate={rate} HTTP/1.1\r\nhost: x\r\n"
                     "content-length: 0\r\n\r\n".encode())
        client = sock.getsockname()[1]
        sock.setblocking(False)
        tail, deadline = b"", time.monotonic() + 30 + chunks / rate
        while not tail.endswith(b"\r\n0\r\n\r\n"):
            if time.monotonic() > deadline:
                raise TimeoutError("the answer did not end")
            time.sleep(0.005)
            wire.take()
            while True:
                try:
                    data = sock.recv(1 << 20)
                except BlockingIOError:
                    break
                if not data:
                    raise ConnectionError("the connection closed mid-answer")
                tail = (tail + data)[-16:]
        sock.close()
        wire.take()
        into: dict[int, int] = {}
        out: dict[int, int] = {}
        for stamp, source, target, payload in wire.packets:
            side = into if source == up_port else out if (source, target) == (proxy_port, client) else None
            if side is not None:
                for key in STAMP.findall(payload):
                    side.setdefault(int(key), stamp)
        return [(out[k] - into[k]) / 1e9 for k in into if k in out], wire.dropped()
    finally:
        wire.close()


def native_relay(up_port: int) -> tuple[subprocess.Popen[bytes], int] | None:
    """socat relaying a port of its own to the upstream (a relay in C that only copies), if it is installed."""
    if shutil.which("socat") is None:
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    relay = subprocess.Popen(["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay",
                              f"TCP:127.0.0.1:{up_port},nodelay"])
    for _ in range(200):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return relay, port
        time.sleep(0.01)
    relay.terminate()
    return None


_KEPT: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
"""One kept-alive connection per port, as an agent's SDK keeps one."""


async def one(port: int, query: str, body: bytes = b"") -> tuple[float, list[float]]:
    """(time to the first byte, each chunk's delay from its send to its arrival) of one request, on the port's
    kept-alive connection."""
    if port not in _KEPT:
        _KEPT[port] = await asyncio.open_connection("127.0.0.1", port)
    reader, writer = _KEPT[port]
    sent = time.perf_counter()
    writer.write(f"POST /v1/messages?{query} HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                 + body)
    first = await reader.read(1)
    ttfb = time.perf_counter() - sent
    delays: list[float] = []
    buffer = first
    while not buffer.endswith(b"\r\n0\r\n\r\n"):
        data = await reader.read(65536)
        now = time.perf_counter_ns()
        if not data:
            raise ConnectionError("the connection closed mid-answer")
        buffer += data
        for stamp in STAMP.findall(data):
            delays.append((now - int(stamp)) / 1e9)
    return ttfb, delays


def paired(up_port: int, proxy_port: int, chunks: int, rate: float) -> tuple[list[float], list[float]]:
    """Each chunk's delay from its send (the upstream's real-time clock just before it wrote the chunk to both
    paths) to its arrival (the kernel's receive stamp on this client's socket), direct and proxied: the client's
    own scheduling is out of the figures, and the pairs share every noise of the upstream."""
    pair = f"{time.perf_counter_ns()}"
    socks = []
    for port in (up_port, proxy_port):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.sendall(f"POST /v1/messages?chunks={chunks}&rate={rate}&pair={pair} HTTP/1.1\r\nhost: x\r\n"
                     "content-length: 0\r\n\r\n".encode())
        socks.append(sock)
    delays: list[dict[int, float]] = [{}, {}]
    buffers = [b"", b""]
    open_ = {0, 1}
    try:
        while open_:
            ready, _, _ = select.select([socks[i] for i in open_], [], [], 30)
            if not ready:
                raise TimeoutError("no chunk for 30 s")
            for i in list(open_):
                if socks[i] not in ready:
                    continue
                data, ancillary, _, _ = socks[i].recvmsg(1 << 16, socket.CMSG_SPACE(16))
                arrived = next((int.from_bytes(raw[:8], "little") * 10**9 + int.from_bytes(raw[8:16], "little")
                                for level, kind, raw in ancillary if kind == SO_TIMESTAMPNS), time.time_ns())
                if not data:
                    raise ConnectionError("the connection closed mid-answer")
                buffers[i] += data
                for stamp in STAMP.findall(data):
                    delays[i][int(stamp)] = (arrived - int(stamp)) / 1e9
                if buffers[i].endswith(b"\r\n0\r\n\r\n"):
                    open_.discard(i)
                buffers[i] = buffers[i][-16:]
    finally:
        for sock in socks:
            sock.close()
    both = sorted(set(delays[0]) & set(delays[1]))
    return [delays[0][k] for k in both], [delays[1][k] for k in both]


def goal(what: str, ok: bool) -> None:
    print(f"  goal {what}: {'met' if ok else 'NOT met'}")


def conditions() -> str:
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average {load} (1 / 5 / 15 min), Python {sys.version.split()[0]}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def main(requests: int, big_calls: int) -> None:
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    assert upstream.stdout is not None
    up_port = int(upstream.stdout.readline())
    record = Path(tempfile.mkdtemp()) / "bench.jsonl"
    proxy = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "proxy", "--port", "0", "--upstream",
                              f"http://127.0.0.1:{up_port}", "--record", str(record)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proxy.stderr is not None
    line = proxy.stderr.readline()
    proxy_port = int(line.rsplit(":", 1)[1])
    # the proxy says a line per call: read them all, or past a pipe's 64 KB it would wait on its stderr
    threading.Thread(target=proxy.stderr.read, daemon=True).start()
    try:
        for _ in range(20):  # warm both paths
            await one(up_port, "chunks=1")
            await one(proxy_port, "chunks=1")
        direct, proxied = [], []
        for _ in range(requests):
            direct.append((await one(up_port, "chunks=1"))[0])
            proxied.append((await one(proxy_port, "chunks=1"))[0])
        added = [p - d for p, d in zip(proxied, direct, strict=True)]
        added_p50 = statistics.median(proxied) - statistics.median(direct)
        added_p99 = pct(proxied, 99) - pct(direct, 99)
        print(f"time to first byte, {requests} requests each way, interleaved:")
        print(f"  direct p50 {statistics.median(direct) * 1e3:.3f} ms, proxied p50 "
              f"{statistics.median(proxied) * 1e3:.3f} ms")
        print(f"  added p50 {added_p50 * 1e3:.3f} ms, p99 {added_p99 * 1e3:.3f} ms (pairwise median "
              f"{statistics.median(added) * 1e3:.3f} ms)")
        goal("added time to first byte p50 < 0.5 ms", added_p50 < 0.5e-3)
        goal("added time to first byte p99 < 2 ms", added_p99 < 2e-3)
        why_not = can_capture()
        if why_not:
            print(f"per-chunk delay at the wire: not taken ({why_not}); the goals are judged on the paired figures")
        native = None if why_not else native_relay(up_port)
        try:
            for rate in (750, 12_000):
                chunks = int(rate * 2)
                before = cpu_s(proxy.pid)
                plain, via = await asyncio.to_thread(paired, up_port, proxy_port, chunks, rate)
                spent = cpu_s(proxy.pid) - before
                added = [v - d for v, d in zip(via, plain, strict=True)]
                print(f"per-chunk delay at {rate:,} chunks/s ({chunks:,} chunks, each sent to both paths at once, "
                      f"kernel arrival stamps): direct p50 {statistics.median(plain) * 1e3:.3f} / p99 "
                      f"{pct(plain, 99) * 1e3:.3f} ms, proxied p50 {statistics.median(via) * 1e3:.3f} / p99 "
                      f"{pct(via, 99) * 1e3:.3f} ms; added per chunk p50 {statistics.median(added) * 1e3:.3f} / "
                      f"p99 {pct(added, 99) * 1e3:.3f} ms; proxy CPU {spent / chunks * 1e3 * 1e3:.0f} ms per "
                      "1,000 chunks")
                if why_not:
                    goal(f"added per-chunk delay p99 < 0.2 ms at {rate:,} chunks/s", pct(added, 99) < 0.2e-3)
                    continue
                before = cpu_s(proxy.pid)
                wire, dropped = await asyncio.to_thread(at_the_wire, up_port, proxy_port, chunks, rate)
                spent = cpu_s(proxy.pid) - before
                print(f"  at the wire (each chunk's packet out of the proxy less its packet in, kernel stamps; "
                      f"{len(wire):,} chunks{f', {dropped} packets lost' if dropped else ''}): forwarding p50 "
                      f"{statistics.median(wire) * 1e3:.3f} / p99 {pct(wire, 99) * 1e3:.3f} / max "
                      f"{max(wire) * 1e3:.3f} ms; proxy CPU {spent / chunks * 1e6:.0f} ms per 1,000 chunks")
                if native is not None:
                    floor, _ = await asyncio.to_thread(at_the_wire, up_port, native[1], chunks, rate)
                    print(f"  the same through socat, a relay in C that only copies (this box's floor): p50 "
                          f"{statistics.median(floor) * 1e3:.3f} / p99 {pct(floor, 99) * 1e3:.3f} / max "
                          f"{max(floor) * 1e3:.3f} ms")
                goal(f"per-chunk forwarding delay p99 < 0.2 ms at {rate:,} chunks/s (at the wire)",
                     pct(wire, 99) < 0.2e-3)
        finally:
            if native is not None:
                native[0].terminate()
                native[0].wait()
        body = b'{"model":"m","stream":true,"pad":"' + b"x" * (4 * 1024 * 1024) + b'"}'
        started = time.perf_counter()
        for _ in range(big_calls):
            await one(proxy_port, "chunks=3", body)
        if big_calls:
            rss = rss_mb(proxy.pid)
            print(f"RSS after {big_calls} calls with 4 MB bodies: {rss:.0f} MB ({time.perf_counter() - started:.0f} s)")
            goal("RSS after the 4 MB calls < 100 MB", rss < 100)
    finally:
        proxy.terminate()
        upstream.terminate()
        proxy.wait()
        upstream.wait()


async def serve_ttft(requests: int) -> None:
    if requests <= 0:
        return
    serve = subprocess.Popen([sys.executable, "-m", "tokrace.tui.main", "serve", "--port", "0", "--ttft-ms", "100",
                              "--tok-s", "1000"], stderr=subprocess.PIPE, text=True)
    assert serve.stderr is not None
    port = 0
    while not port:
        line = serve.stderr.readline()
        if "Anthropic base_url" in line:
            port = int(line.split()[2].rsplit(":", 1)[1])
    try:
        for label, fresh in (("new bodies", True), ("the same conversation again", False)):
            errors = []
            for n in range(requests):
                text = ("word " * 82_000) + (str(n) if fresh else "")
                body = json.dumps({"model": "m", "stream": True, "max_tokens": 5,
                                   "messages": [{"role": "user", "content": text}]}).encode()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                sent = time.perf_counter()
                writer.write(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                             + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
                got = b""
                while b"content_block_delta" not in got:
                    more = await reader.read(65536)
                    if not more:
                        break
                    got += more
                errors.append(time.perf_counter() - sent - 0.100)
                await reader.read()
                writer.close()
            errors.sort()
            print(f"tokrace serve TTFT error against its 100 ms plan, {len(body) // 1024} KB bodies, {label}: "
                  f"p50 {statistics.median(errors) * 1e3:+.2f} ms, p90 {pct(errors, 90) * 1e3:+.2f} ms, "
                  f"max {errors[-1] * 1e3:+.2f} ms")
            goal(f"serve TTFT error p50 < 1 ms ({label})", abs(statistics.median(errors)) < 1e-3)
    finally:
        serve.terminate()
        serve.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--big-calls", type=int, default=1000)
    parser.add_argument("--serve-requests", type=int, default=20)
    args = parser.parse_args()
    print(f"conditions at the start: {conditions()}")
    asyncio.run(main(args.requests, args.big_calls))
    asyncio.run(serve_ttft(args.serve_requests))
    print(f"conditions at the end: {conditions()}")
