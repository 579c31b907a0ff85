"""What a wake-up costs on this machine: one process reads a loopback socket that another process (on its own
core) writes one small SSE-sized packet to at a steady rate, four ways: a reader thread per packet handing each
read to the event loop (``thread``), the event loop woken per packet (``epoll``), and the event loop's timer every 2
or 1 ms draining whatever queued (``timer2``, ``timer1``). Prints CPU (every thread) per packet. Not a test.

    python scripts/bench_wake.py RATE [thread] [epoll] [timer2] [timer1]     e.g. 750 or 4500 packets a second
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import sys
import threading
import time
from multiprocessing.queues import Queue

SO_TIMESTAMPNS = 35
MESSAGE = b'data: {"choices":[{"delta":{"content":"tok"}}]}\n\n'
SECONDS = 3.0


def server(ports: Queue[int], rate: float) -> None:
    """Accept one connection and send it ``MESSAGE`` ``rate`` times a second (busy-waiting: exact gaps)."""
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    ports.put(listener.getsockname()[1])
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    gap, t = 1.0 / rate, time.perf_counter()
    end = t + SECONDS
    while t < end:
        t += gap
        while time.perf_counter() < t:
            pass
        conn.send(MESSAGE)
    conn.close()


async def read(mode: str, port: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    space = socket.CMSG_SPACE(16)
    count = [0, 0]  # reads, bytes
    cpu0, wall0 = time.process_time(), time.perf_counter()

    def got(data: bytes) -> None:
        count[0] += 1
        count[1] += len(data)
        if not data and not done.done():
            done.set_result(None)

    if mode == "epoll":
        sock.setblocking(False)

        def ready() -> None:
            try:
                data = sock.recvmsg(65536, space)[0]
            except BlockingIOError:
                return
            got(data)
            if not data:
                loop.remove_reader(sock.fileno())

        loop.add_reader(sock.fileno(), ready)
    elif mode.startswith("timer"):
        every = float(mode[5:]) / 1000
        sock.setblocking(False)

        def tick() -> None:
            try:
                while True:
                    data = sock.recvmsg(65536, space)[0]
                    got(data)
                    if not data:
                        return
            except BlockingIOError:
                loop.call_later(every, tick)

        tick()
    else:
        def pump() -> None:
            while True:
                data = sock.recvmsg(65536, space)[0]
                loop.call_soon_threadsafe(got, data)
                if not data:
                    return

        threading.Thread(target=pump, daemon=True).start()
    await done
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    packets = count[1] / len(MESSAGE)
    print(f"{mode:8s} {packets:6.0f} packets in {count[0]:6d} reads: {100 * cpu / wall:5.1f} % of a core, "
          f"{1e6 * cpu / packets:5.1f} us of CPU per packet", flush=True)
    sock.close()


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    rate = float(sys.argv[1])
    for mode in sys.argv[2:] or ["thread", "epoll", "timer2", "timer1"]:
        ports: Queue[int] = mp.Queue()
        writer = mp.Process(target=server, args=(ports, rate), daemon=True)
        writer.start()
        port = ports.get()
        if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        asyncio.run(read(mode, port))
        writer.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
