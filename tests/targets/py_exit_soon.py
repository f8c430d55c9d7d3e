"""pystack target: burns CPU for SECONDS (default 3), then exits by itself.

usage: py_exit_soon.py [SECONDS]   (prints "ready")
"""
import sys
import time

end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 3.0)
print("ready", flush=True)
while time.monotonic() < end:
    pass
