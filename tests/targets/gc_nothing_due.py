"""GC target for pygc: automatic collector calls that collect nothing, among real ones.

Prints "ready", waits for a line on stdin, then: 50 json.loads calls that fail with
RecursionError (on 3.13+ each lets the automatic collector run with no generation
due: it returns at once, no callback runs), 3 explicit gc.collect(0), and cyclic
garbage until 20 automatic collections have run. Prints "done" followed by every
collection the gc.callbacks saw, as "generation start_ns stop_ns" (time.monotonic_ns,
the clock of bpf_ktime_get_ns), then waits for another line before exiting.
"""
import gc
import json
import sys
import time

recs, cur = [], {}


def on_gc(phase, info):
    if phase == "start":
        cur["start"] = time.monotonic_ns()
    else:
        recs.append((info["generation"], cur.pop("start", 0), time.monotonic_ns()))


class Node:
    pass


print("ready", flush=True)
sys.stdin.readline()
gc.callbacks.append(on_gc)
for _ in range(50):
    try:
        json.loads("[" * 100000 + "]" * 100000)
    except RecursionError:
        pass
for _ in range(3):
    gc.collect(0)
while len(recs) < 23:
    a, b = Node(), Node()
    a.other, b.other = b, a
gc.callbacks.remove(on_gc)
print("done " + " ".join("%d:%d:%d" % r for r in recs), flush=True)
sys.stdin.readline()
