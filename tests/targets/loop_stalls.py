"""An event loop that stalls in known ways, for pyloop's tests.

    loop_stalls.py LOOP PATTERN [GAP_MS]

LOOP: asyncio (the default loop; asyncio's debug mode when PYTHONASYNCIODEBUG=1,
with slow_callback_duration 0.1 s), uvloop, or selectors (a plain selectors loop
written out here, no asyncio). PATTERN: comma-separated stalls done in turn, forever,
GAP_MS apart (default 400): sleep:MS (time.sleep in a callback: off the CPU),
cpu:MS (a busy loop in a callback: on the CPU), burst:N (N loop iterations of no
work at each SIGUSR1; the loop has no timer meanwhile, so it blocks in its poller),
none (no stall; the loop only ticks every GAP_MS), spread:N (a 12 ms busy callback
that runs 120 lines, 100 us each, of a function no earlier one ran, N functions
made at the start and then used again: every sample of it a new stack).

Prints "ready" once the loop runs; then, per stall, one JSON line with the kind, the
wanted ms, time.time() when the blocking call began and its length in seconds
(time.monotonic(): the ground truth for the loops without a debug mode), and per
burst {"burst": N, "selects": the loop's selector.select() calls during it}. asyncio's debug messages go to stderr with time.time() first.
PYLOOP_TARGET_DELAY=SECONDS: no loop at all (no poller) for that long after "ready", or
until a SIGUSR2.
"""
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time


def blocking_call(seconds):
    time.sleep(seconds)  # BLOCK


def cpu_work(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:  # CPU
        n += 1
    return n


SPREAD_LINES = 120
SPREAD = []


def make_spread(n):
    """n functions of SPREAD_LINES lines, each line busy for 100 us: a line is a frame of its own."""
    body = "".join("    e = t() + 0.0001\n    while t() < e: pass\n" for _ in range(SPREAD_LINES))
    code = "".join("def spread_%d(t):\n%s" % (i, body) for i in range(n))
    names = {}
    exec(compile(code, "<spread>", "exec"), names)
    SPREAD.extend(names["spread_%d" % i] for i in range(n))


def stall(kind, ms, nth=0):
    w0, t0 = time.time(), time.monotonic()
    if kind == "sleep":
        blocking_call(ms / 1000.0)
    elif kind == "spread":
        SPREAD[nth % len(SPREAD)](time.monotonic)
    else:
        cpu_work(ms / 1000.0)
    t1 = time.monotonic()
    print(json.dumps({"kind": kind, "ms": ms, "wall": w0, "seconds": t1 - t0}), flush=True)


def parse(pattern):
    out = []
    for part in pattern.split(","):
        kind, _, n = part.partition(":")
        out.append((kind, int(n or 0)))
    return out


def run_asyncio(steps, gap, use_uvloop):
    import asyncio

    async def main():
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = 0.1
        burst = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, burst.set)
        selects = [0]
        selector = getattr(loop, "_selector", None)
        if selector is not None:
            # the target's own count of its poller calls (one epoll_wait per select)
            real = selector.select

            def counted(timeout=None):
                selects[0] += 1
                return real(timeout)
            selector.select = counted
        print("ready", flush=True)
        i = 0
        while True:
            kind, n = steps[i % len(steps)]
            i += 1
            if kind in ("sleep", "cpu", "none", "spread"):
                await asyncio.sleep(gap)
            if kind in ("sleep", "cpu"):
                stall(kind, n)
            elif kind == "spread":
                stall(kind, n, i)
            elif kind == "burst":
                # no timer while waiting: the loop blocks in its poller until the signal
                await burst.wait()
                burst.clear()
                before = selects[0]
                for _ in range(n):
                    await asyncio.sleep(0)
                print(json.dumps({"burst": n, "selects": selects[0] - before}), flush=True)

    if use_uvloop:
        import uvloop
        uvloop.install()
    asyncio.run(main(), debug=os.environ.get("PYTHONASYNCIODEBUG") == "1")


def run_selectors(steps, gap):
    """A loop of its own: a selector, timers as deadlines, a self-pipe for nothing."""
    sel = selectors.DefaultSelector()
    r, w = socket.socketpair()
    sel.register(r, selectors.EVENT_READ)
    print("ready", flush=True)
    i = 0
    while True:
        kind, n = steps[i % len(steps)]
        i += 1
        deadline = time.monotonic() + gap
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sel.select(left)
        if kind in ("sleep", "cpu"):
            stall(kind, n)


def main():
    import logging
    logging.basicConfig(format="%(created).6f %(message)s")
    loop = sys.argv[1]
    steps = parse(sys.argv[2])
    for kind, n in steps:
        if kind == "spread" and not SPREAD:
            make_spread(n)
    gap = (int(sys.argv[3]) if len(sys.argv) > 3 else 400) / 1000.0
    delay = float(os.environ.get("PYLOOP_TARGET_DELAY", "0"))
    if delay:
        go = threading.Event()
        signal.signal(signal.SIGUSR2, lambda *_: go.set())
        print("ready", flush=True)
        go.wait(delay)
    if loop == "selectors":
        run_selectors(steps, gap)
    else:
        run_asyncio(steps, gap, loop == "uvloop")


if __name__ == "__main__":
    main()
