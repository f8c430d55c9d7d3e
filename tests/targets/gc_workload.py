"""GC target for pygc's tests: records every collection through gc.callbacks.

Usage: gc_workload.py OUT_FILE [SECONDS_TO_WAIT_FOR_GO]
Writes "ready <pid>" to stdout, waits for a line on stdin ("go"), then makes
collections of all three generations (automatic gen-0 ones from allocating cyclic
garbage, explicit gen-1, and slow gen-2 ones over a big live heap), then writes one
line per collection to OUT_FILE: "generation start_ns stop_ns collected preempted"
(preempted: involuntary context switches of the thread inside the bracket, which
stretch it by however long the CPU was taken away), the
gc.get_stats() gen-0 delta, and exits after a second line on stdin ("exit").
Clock: time.perf_counter_ns(), CLOCK_MONOTONIC on Linux, bpf_ktime_get_ns's clock.
Runs on CPython 3.8 - 3.15.
"""
import gc
import resource
import sys
import time

out_path = sys.argv[1]
records = []
current = {}


def nivcsw():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw


def on_gc(phase, info):
    now = time.perf_counter_ns()
    if phase == "start":
        current["gen"] = info["generation"]
        current["csw"] = nivcsw()
        current["start"] = time.perf_counter_ns()  # the bracket starts after the bookkeeping
    else:
        records.append((current.get("gen", -1), current.get("start", 0), now,
                        info.get("collected", 0) + info.get("uncollectable", 0),
                        nivcsw() - current.get("csw", 0)))


class Node:
    def __init__(self, other=None):
        self.other = other


def cycles(n):
    for _ in range(n):
        a = Node()
        b = Node(a)
        a.other = b


print("ready %d" % __import__("os").getpid(), flush=True)
sys.stdin.readline()

keep = [[Node() for _ in range(50)] for _ in range(4000)]  # a big live heap: slow gen-2
stats0 = gc.get_stats()
gc.callbacks.append(on_gc)
for round_ in range(6):
    cycles(20000)          # automatic gen-0 (and some gen-1) collections
    gc.collect(1)
    gc.collect(0)
    keep.append([Node() for _ in range(20000)])
    gc.collect(2)          # slow full collection over the live heap
gc.callbacks.remove(on_gc)
stats1 = gc.get_stats()

with open(out_path, "w") as f:
    for r in records:
        f.write("%d %d %d %d %d\n" % r)
    f.write("stats %d %d %d\n" % tuple(stats1[g]["collections"] - stats0[g]["collections"]
                                      for g in range(3)))
print("done", flush=True)
sys.stdin.readline()
