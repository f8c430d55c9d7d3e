"""Stored-profile target (issue 29): a known CPU split, or deep and varied stacks.

usage: py_profile.py split   a(), b(), c() call the same work() with 50k, 30k and 20k
                             iterations: about 50/30/20 of the CPU. The target times its
                             own phases with time.thread_time() (timed_callers.py) and
                             prints them as JSON when it ends (SIGTERM): the ground truth.
       py_profile.py split-slow-b   the same after a "deploy" that makes b() 3x slower
                             (90k iterations): about 31/56/13 (issue 27's diffs).
       py_profile.py deep    every pass walks one of 200 paths (8 levels of two
                             functions each, then plain recursion) to a stack of 25
                             frames, <module> included, and works at its end.

It prints "ready", then waits for a line on stdin before it starts working (and
timing), so that a profiler attached before sees exactly the measured window.
"""
import sys

from timed_callers import TimedCallers, serve

B_ITERATIONS = 90000 if sys.argv[1:] == ["split-slow-b"] else 30000


def work(n):
    s = 0
    for i in range(n): s += i  # noqa: E701 (one line: one leaf line, one stack per path)
    return s


def a():
    return work(50000)


def b():
    return work(B_ITERATIONS)


def c():
    return work(20000)


BRANCH_LEVELS = 8
DEPTH = 14  # frames: <module>, deep(), 8 x (down, left|right), down x 6, work(): 25


def down(level, path):
    if level < BRANCH_LEVELS:
        if (path >> level) & 1:
            return left(level + 1, path)
        return right(level + 1, path)
    if level < DEPTH - 1:
        return down(level + 1, path)
    return work(3000)


def left(level, path):
    return down(level, path)


def right(level, path):
    return down(level, path)


def split():
    for call in timed.forever():
        call()


def deep():
    i = 0
    while True:
        down(0, i % 200)
        i += 1


timed = TimedCallers([("a", a), ("b", b), ("c", c)])
serve(timed, wait=True, restart=False)
split() if sys.argv[1] in ("split", "split-slow-b") else deep()
