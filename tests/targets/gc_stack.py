"""GC target for pygc --stack: explicit collections from a known function and line,
in a thread named "gc-caller". Prints "ready", waits for a line on stdin, then calls
collect_here() 5 times and prints "done FILE LINE" (where gc.collect(1) is called).
"""
import gc
import sys
import threading
import time


def collect_here():
    gc.collect(1)  # COLLECT_LINE


def caller():
    for _ in range(5):
        collect_here()
        time.sleep(0.05)


print("ready", flush=True)
sys.stdin.readline()
t = threading.Thread(target=caller, name="gc-caller")
t.start()
t.join()
with open(__file__) as f:
    line = next(i for i, l in enumerate(f, 1) if l.rstrip().endswith("# COLLECT_LINE"))
print("done %s %d" % (__file__, line), flush=True)
sys.stdin.readline()
