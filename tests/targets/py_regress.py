"""Differential-profile target (issue 27): a known split before and after a "deploy".

usage: py_regress.py v1|v2   a(), b(), c() call the same work() with 50k, 20k and 30k
                             iterations; v2 is the "deploy" that makes b() 3x slower
                             (60k). The target times its phases with time.thread_time()
                             and prints them as JSON when it ends (SIGTERM): the truth.

It prints "ready", then waits for a line on stdin before it starts working (and
timing), so that a profiler attached before sees exactly the measured window.
"""
import json
import signal
import sys
import time

B_ITERATIONS = {"v1": 20000, "v2": 60000}[sys.argv[1]]
spent = {"a": 0.0, "b": 0.0, "c": 0.0}


def work(n):
    s = 0
    for i in range(n): s += i  # noqa: E701 (one line: one leaf line)
    return s


def a():
    return work(50000)


def b():
    return work(B_ITERATIONS)


def c():
    return work(30000)


def stop(signum, frame):
    print(json.dumps(spent), flush=True)
    sys.exit(0)


def serve():
    clock = time.thread_time
    while True:
        t0 = clock()
        a()
        t1 = clock()
        b()
        t2 = clock()
        c()
        t3 = clock()
        spent["a"] += t1 - t0
        spent["b"] += t2 - t1
        spent["c"] += t3 - t2


signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
sys.stdin.readline()
serve()
