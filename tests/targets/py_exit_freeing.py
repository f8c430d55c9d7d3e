"""pystack target: builds a big list, waits for a line on stdin, then exits; the
interpreter then frees the list for a good fraction of a second after the last Python
frame has returned (its thread state has no frame then).

usage: py_exit_freeing.py   (prints "ready" once the list is built)
"""
import sys

big = [str(i) * 3 for i in range(6_000_000)]
print("ready", flush=True)
sys.stdin.readline()
