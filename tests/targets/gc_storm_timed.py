"""A GC storm as fast as the interpreter goes, each collection timed by gc.callbacks.

Usage: gc_storm_timed.py OUT_FILE [THREADS]
Prints "ready <pid>", then collects until stdin closes: gen 0 over a little fresh
cyclic garbage each time, gen 1 every 50th, gen 2 (over a small live heap) every
2000th: thousands of collections a second. THREADS (default 0) more threads do the
same, so that the GIL changes hands. At the end it writes one line per collection to
OUT_FILE, "generation start_ns stop_ns" (time.perf_counter_ns: CLOCK_MONOTONIC, the
clock of bpf_ktime_get_ns), prints the number of collections and exits.
"""
import array
import gc
import os
import sys
import threading
import time

out_path = sys.argv[1]
nthreads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
gens, starts, stops = array.array("b"), array.array("q"), array.array("q")
current = {}
stop = threading.Event()


def on_gc(phase, info):
    now = time.perf_counter_ns()
    tid = threading.get_ident()
    if phase == "start":
        current[tid] = (info["generation"], time.perf_counter_ns())
    elif tid in current:
        gen, start = current.pop(tid)
        gens.append(gen)
        starts.append(start)
        stops.append(now)


class Node:
    def __init__(self, other=None):
        self.other = other


def storm():
    keep = [[Node() for _ in range(20)] for _ in range(200)]  # gen 2 has something to walk
    n = 0
    while not stop.is_set():
        for _ in range(10):
            a = Node()
            a.other = Node(a)
        n += 1
        gc.collect(2 if n % 2000 == 0 else 1 if n % 50 == 0 else 0)
    return keep


gc.callbacks.append(on_gc)
workers = [threading.Thread(target=storm, daemon=True) for _ in range(nthreads)]
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("ready %d" % os.getpid(), flush=True)
for w in workers:
    w.start()
storm()
for w in workers:
    w.join()
gc.callbacks.remove(on_gc)
with open(out_path, "w") as f:
    for g, s, e in zip(gens, starts, stops):
        f.write("%d %d %d\n" % (g, s, e))
print(len(gens), flush=True)
