"""pystack target: idle until SIGUSR1, then starts a thread named "late-starter" that
burns CPU in late_work(): a thread created after the profiler attached.

usage: py_late_thread.py   (prints "ready")
"""
import signal
import threading
import time


def late_work():
    n = 0
    while True:
        n += 1


def start(signum, frame):
    threading.Thread(target=late_work, name="late-starter", daemon=True).start()


signal.signal(signal.SIGUSR1, start)
print("ready", flush=True)
while True:
    time.sleep(3600)
