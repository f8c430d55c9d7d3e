"""pystack target: thread "hasher" spends its time in hashlib with the GIL released
(sha256 of 8 MB), while the main thread spins in Python holding the GIL. A walker that
finds threads through the GIL holder, or 3.12+'s _Py_tss_tstate, misses the hasher.

usage: py_nogil.py   (prints the hasher's native thread id, then runs until killed)
"""
import hashlib
import threading

DATA = b"x" * (8 << 20)
ready = threading.Event()
ids = {}


def hash_loop():
    ids["tid"] = threading.get_native_id()
    ready.set()
    while True:
        hashlib.sha256(DATA).digest()


def spin():
    n = 0
    while True:
        n += 1


threading.Thread(target=hash_loop, name="hasher", daemon=True).start()
ready.wait()
print(ids["tid"], flush=True)
spin()
