"""pystack target: the main thread spins forever on one known line (BUSY_LINE) three
calls deep, so every sample has the same stack: outer -> Holder.middle -> spin.
The busy line is the one marked BUSY (tests find it in this file).

usage: py_busyline.py   (prints "ready", then spins until killed)
"""
import sys


class Holder:
    def middle(self):
        return spin()


def spin():
    n = 0
    while True: n += 1  # noqa: E701 BUSY: the whole loop is on this one line


def outer():
    return Holder().middle()


print("ready", flush=True)
sys.exit(outer())
