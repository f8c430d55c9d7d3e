"""An event loop that stalls in known ways, for pyloop's tests.

    loop_stalls.py LOOP PATTERN [GAP_MS]

LOOP: asyncio (the default loop; asyncio's debug mode when PYTHONASYNCIODEBUG=1,
with slow_callback_duration 0.1 s), uvloop, or selectors (a plain selectors loop
written out here, no asyncio). PATTERN: comma-separated stalls done in turn, forever,
GAP_MS apart (default 400): sleep:MS (time.sleep in a callback: off the CPU),
cpu:MS (a busy loop in a callback: on the CPU), burst:N (N loop iterations of no
work, once, at SIGUSR1: the pattern waits for it), none (no stall; the loop only
ticks every GAP_MS).

Prints "ready" once the loop runs; then, per stall, one JSON line with the kind, the
wanted ms and time.monotonic() before and after the blocking call (the ground truth
for the loops without a debug mode), and per burst {"burst": N, "iterations": ...}.
"""
import json
import os
import selectors
import signal
import socket
import sys
import time


def blocking_call(seconds):
    time.sleep(seconds)  # BLOCK


def cpu_work(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:  # CPU
        n += 1
    return n


def stall(kind, ms):
    t0 = time.monotonic()
    if kind == "sleep":
        blocking_call(ms / 1000.0)
    else:
        cpu_work(ms / 1000.0)
    t1 = time.monotonic()
    print(json.dumps({"kind": kind, "ms": ms, "start": t0, "end": t1}), flush=True)


def parse(pattern):
    out = []
    for part in pattern.split(","):
        kind, _, n = part.partition(":")
        out.append((kind, int(n or 0)))
    return out


def run_asyncio(steps, gap, use_uvloop):
    import asyncio

    burst_wanted = []
    signal.signal(signal.SIGUSR1, lambda *a: burst_wanted.append(1))

    async def main():
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = 0.1
        print("ready", flush=True)
        i = 0
        while True:
            kind, n = steps[i % len(steps)]
            i += 1
            await asyncio.sleep(gap)
            if kind in ("sleep", "cpu"):
                stall(kind, n)
            elif kind == "burst":
                while not burst_wanted:
                    await asyncio.sleep(0.05)
                burst_wanted.clear()
                for _ in range(n):
                    await asyncio.sleep(0)
                print(json.dumps({"burst": n}), flush=True)

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
    loop = sys.argv[1]
    steps = parse(sys.argv[2])
    gap = (int(sys.argv[3]) if len(sys.argv) > 3 else 400) / 1000.0
    if loop == "selectors":
        run_selectors(steps, gap)
    else:
        run_asyncio(steps, gap, loop == "uvloop")


if __name__ == "__main__":
    main()
