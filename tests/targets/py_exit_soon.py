"""pystack target: burns CPU until SIGUSR1, then for SECONDS more (default 2), then exits
by itself.

usage: py_exit_soon.py [SECONDS]   (prints "ready")
"""
import signal
import sys
import time

end = None


def soon(signum, frame):
    global end
    end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)


signal.signal(signal.SIGUSR1, soon)
print("ready", flush=True)
while end is None or time.monotonic() < end:
    pass
