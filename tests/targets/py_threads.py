"""pystack target: 10 named threads (long, partly non-ASCII names, longer than the 15
bytes an OS thread name can hold) that burn CPU in short bursts; the main thread only
waits. Prints the names as JSON once all threads run.

usage: py_threads.py
"""
import json
import threading
import time

NAMES = ["request-handler-%02d-ünï" % i for i in range(10)]
started = threading.Barrier(len(NAMES) + 1)


def burn():
    started.wait()
    while True:
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass
        time.sleep(0.015)


for name in NAMES:
    threading.Thread(target=burn, name=name, daemon=True).start()
started.wait()
print(json.dumps(NAMES, ensure_ascii=True), flush=True)
while True:
    time.sleep(3600)
