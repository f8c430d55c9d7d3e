"""A steady storm of garbage collections for the database sink tests.

Usage: gc_storm.py RATE
Prints "ready", then runs gc.collect(0) RATE times a second until stdin closes;
then prints how many collections it made and exits.
"""
import gc
import sys
import threading
import time

rate = float(sys.argv[1])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("ready", flush=True)
n = 0
next_t = time.monotonic()
while not stop.is_set():
    gc.collect(0)
    n += 1
    next_t += 1.0 / rate
    delay = next_t - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print(n, flush=True)
