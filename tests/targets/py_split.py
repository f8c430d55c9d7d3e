"""pystack target: a() and b() call the same work() with 70k and 30k iterations, so
about 70% of the CPU goes to a() and 30% to b(). The target measures its own split
with time.thread_time() and prints it as JSON when it ends (SIGTERM): the ground truth.
SIGUSR1 restarts the measurement, so that it can cover the same window as a profiler
(the split drifts by a few points with the machine's load).

usage: py_split.py [--wait]   (prints "ready", then runs until SIGTERM; --wait: starts
running, and measuring, only after a line on stdin, so that profilers attached
before it see exactly the measured window)
"""
import json
import signal
import sys
import time

spent = {"a": 0.0, "b": 0.0}


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


def a():
    return work(70000)


def b():
    return work(30000)


def stop(signum, frame):
    print(json.dumps(spent), flush=True)
    sys.exit(0)


def restart(signum, frame):
    spent["a"] = spent["b"] = 0.0


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR1, restart)
print("ready", flush=True)
if "--wait" in sys.argv:
    sys.stdin.readline()
clock = time.thread_time
while True:
    t0 = clock()
    a()
    t1 = clock()
    b()
    t2 = clock()
    spent["a"] += t1 - t0
    spent["b"] += t2 - t1
