"""pystack target: builds a big list, waits for a line on stdin, then exits; the
interpreter then frees the list for a good fraction of a second after the last Python
frame has returned (its thread state has no frame then).

Instances of a plain class, not strings: each takes C code (the type's dealloc) three
times as long to free for the same memory, so the freeing lasts well above what the
test needs to judge even on a fast host (strings freed in 0.09 s on one).

usage: py_exit_freeing.py   (prints "ready" once the list is built)
"""
import sys


class Plain:
    pass


big = [Plain() for _ in range(6_000_000)]
print("ready", flush=True)
sys.stdin.readline()
