"""pystack target: recurses DEPTH (default 300) frames deep, then spins in leaf().
Stacks deeper than pystack's --max-depth must come out marked truncated.

usage: py_recurse.py [DEPTH]   (prints "ready DEPTH")
"""
import sys

DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 300


def leaf():
    n = 0
    while True: n += 1  # noqa: E701 BUSY


def rec(k):
    if k <= 1:
        return leaf()
    return rec(k - 1)


print("ready", DEPTH, flush=True)
rec(DEPTH)
