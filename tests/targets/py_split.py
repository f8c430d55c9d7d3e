"""pystack target: a() and b() call the same work() with 70k and 30k iterations, so
about 70% of the CPU goes to a() and 30% to b(). The target measures its own split
with time.thread_time() (timed_callers.py) and prints it as JSON when it ends
(SIGTERM): the ground truth.
SIGUSR1 restarts the measurement, so that it can cover the same window as a profiler
(the split drifts by a few points with the machine's load).

usage: py_split.py [--wait]   (prints "ready", then runs until SIGTERM; --wait: starts
running, and measuring, only after a line on stdin, so that profilers attached
before it see exactly the measured window)
"""
import sys

from timed_callers import TimedCallers, serve


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


def a():
    return work(70000)


def b():
    return work(30000)


timed = TimedCallers([("a", a), ("b", b)])
serve(timed, "--wait" in sys.argv)
for call in timed.forever():
    call()
