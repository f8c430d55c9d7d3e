"""Sampler bias target: three callers in a row, first(), second() and third(), each
calling the same work() (equal work by default), timed by the target itself with
time.thread_time_ns() around each call: the ground truth a sampler's shares are held
against. A sampler whose instants correlate with the loop (a fixed period locking onto
the loop or onto the host's timer) gives the callers shares that differ from it by
position.

usage: py_three.py [--wait] [--log FILE] [--tick MS] [N1 N2 N3]   (prints "ready"; SIGUSR1 restarts
the measurement; SIGTERM prints {"first": ns, "second": ns, "third": ns} as JSON and
exits. --wait: start only after a line on stdin. --log: also write, at the end, one line
per call "caller start_ns end_ns" in CLOCK_MONOTONIC (what bpf_ktime_get_ns reads), so
that a sample's time can be placed in the call that ran then. --tick: each loop starts
at the next multiple of MS milliseconds of CLOCK_MONOTONIC, as in a program driven by a
timer, and sleeps for the rest: a sampler whose period is MS, or divides it, then hits
the same place of the loop every time.)
"""
import sys
import time

from timed_callers import TimedCallers, serve

args = [a for a in sys.argv[1:] if a != "--wait"]
log_path = None
if "--log" in args:
    i = args.index("--log")
    log_path = args[i + 1]
    del args[i:i + 2]
tick_ms = None
if "--tick" in args:
    i = args.index("--tick")
    tick_ms = float(args[i + 1])
    del args[i:i + 2]
N1, N2, N3 = (int(x) for x in args) if len(args) == 3 else (20000, 20000, 20000)


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


def first():
    return work(N1)


def second():
    return work(N2)


def third():
    return work(N3)


timed = TimedCallers([("first", first), ("second", second), ("third", third)], clock=time.thread_time_ns,
                     log_path=log_path, tick_ms=tick_ms)
serve(timed, "--wait" in sys.argv)
for call in timed.forever():
    call()
