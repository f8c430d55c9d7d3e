"""A hostile target: a CPython 3.11/3.12 process that corrupts its own frame chain,
thread list and code object names through ctypes while it runs, for the tracers'
robustness tests (tests/integration/test_hostile.py).

usage: hostile.py [KIND,...]   (only those kinds; prints "ready" once its threads run, then runs until SIGTERM or
SIGINT; then prints one JSON line: how many corruption windows of each kind it made,
and exits 0)

Each window lasts WINDOW_S and is undone before anything CPython does could meet it:
  cycle      a caller frame's `previous` points back at its callee: the chain loops
  wild       a caller frame's `previous` points into the kernel half (unreadable)
  garbage    a caller frame's `previous` points at random bytes
  wild_code  a caller frame's code object pointer is unreadable
  huge_name  the running function's code object has a name whose length field says
             2**40 (or -1): a fresh code object each window, so no cache has it yet
  threads    the newest thread's tstate->next points at itself (a cycle), or into the
             kernel half: the thread list of a lookup that reaches it never ends
             (no thread ends before it is done: see list_quiet)
The threads burn CPU (pystack), sleep in short slices (pyoffcpu) and take the GIL from
each other (pygil) inside the windows; the main thread runs gc.collect() on cyclic
garbage between them (pygc).

Why CPython does not trip over it: a frame's `previous` and code pointer are read
when that frame returns (or for tracebacks, sys._getframe, the 3.14 GC); the window is
spent inside its callee, which raises nothing and returns only after the restore.
The automatic GC is off (gc.disable) and gc.collect() runs only while nothing is
corrupted (one lock), signals only set a flag in the main thread, and no thread
starts or ends while the thread list is corrupted (a new thread would be inserted
before the newest one, and only the deletion of the newest one reads its `next`).
"""
import ctypes
import gc
import json
import os
import signal
import sys
import threading
import time
import types

WINDOW_S = 0.05
# CPython 3.11/3.12 layouts (src/python/pyoffsets.c): PyFrameObject.f_frame, and in
# _PyInterpreterFrame `previous` and the code object; PyThreadState.next; str length
OFF = {
    11: dict(f_frame=24, previous=48, code=32, ts_next=8, str_length=16),
    12: dict(f_frame=24, previous=8, code=0, ts_next=8, str_length=16),
}
WILD = 0xffff800000001000  # kernel half: no user read succeeds there

minor = sys.version_info[1]
if sys.version_info[0] != 3 or minor not in OFF:
    sys.exit("hostile.py: CPython 3.11 or 3.12 only")
O = OFF[minor]
stop = threading.Event()
# set once the thread-list corrupter is done: a thread that ends unlinks itself from the
# list, writing its neighbour's `next`; in a window, the restore would then bring back
# a pointer to the freed state (CPython crashed at exit that way)
list_quiet = threading.Event()
corrupting = threading.Lock()  # held while anything is corrupted
counts = {k: 0 for k in ("cycle", "wild", "garbage", "wild_code", "huge_name", "threads", "gc")}
garbage = ctypes.create_string_buffer(os.urandom(4096), 4096)

ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p


def u64(addr):
    return ctypes.c_uint64.from_address(addr)


def iframe(frame):
    """The _PyInterpreterFrame of a frame object."""
    return u64(id(frame) + O["f_frame"]).value


def burn(seconds):
    """CPU, short sleeps and GIL hand-overs, all inside the window."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = 0
        for i in range(3000):
            x += i * i
        time.sleep(0.001)
    return x


def window(kind):
    """Called from level2 <- level1: corrupts level1's or level2's frame, burns, restores."""
    f2 = sys._getframe(1)  # level2
    f1 = sys._getframe(2)  # level1
    a1, a2 = iframe(f1), iframe(f2)
    if kind == "wild_code":
        slot, value = u64(a2 + O["code"]), WILD
    else:
        slot = u64(a1 + O["previous"])
        value = {"cycle": a2, "wild": WILD, "garbage": ctypes.addressof(garbage)}[kind]
    saved = slot.value
    slot.value = value
    try:
        burn(WINDOW_S)
    finally:
        slot.value = saved


def level2(kind):
    window(kind)


def level1(kind):
    level2(kind)


def huge_name_window(n):
    """A fresh function whose code object's name claims to be huge while it runs."""
    name = "".join(["huge_name_", str(n)])  # a str of its own (not interned)
    code = huge_template.__code__.replace(co_name=name, co_qualname=name)
    fn = types.FunctionType(code, globals())
    length = u64(id(name) + O["str_length"])
    fn(length, (1 << 40) if n % 2 else (1 << 64) - 1)


def huge_template(length, value):
    saved = length.value
    length.value = value
    try:
        burn(WINDOW_S)
    finally:
        length.value = saved


def corrupter(kinds):
    n = 0
    while not stop.is_set():
        kind = kinds[n % len(kinds)]
        n += 1
        with corrupting:
            if kind == "huge_name":
                huge_name_window(n)
            elif kind == "none":
                burn(WINDOW_S)
                continue
            else:
                level1(kind)
            counts[kind] += 1
        burn(0.01)  # uncorrupted stacks between windows
    list_quiet.wait()


def thread_list_corrupter(ready):
    ts = ctypes.pythonapi.PyThreadState_Get()
    nxt = u64(ts + O["ts_next"])
    ready.set()
    n = 0
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else list(counts)
    while not stop.is_set() and "threads" in only:
        n += 1
        with corrupting:
            saved = nxt.value
            nxt.value = ts if n % 2 else WILD
            try:
                burn(WINDOW_S)
            finally:
                nxt.value = saved
            counts["threads"] += 1
        burn(0.01)
    list_quiet.set()
    while not stop.is_set():
        burn(WINDOW_S)


class Node:
    def __init__(self):
        self.other = self


def collect():
    for _ in range(2000):
        Node()
    with corrupting:
        gc.collect()
        counts["gc"] += 1


def main():
    # sanity: the layout is what this file says (the code object of a known frame)
    f = sys._getframe()
    if u64(iframe(f) + O["code"]).value != id(f.f_code):
        sys.exit("hostile.py: unexpected frame layout on %s" % sys.version.split()[0])
    gc.disable()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else list(counts)
    mine = lambda kinds: [k for k in kinds if k in only] or ["none"]
    threads = [
        threading.Thread(target=corrupter, args=(mine(["cycle", "wild", "garbage"]),), name="hostile-frames"),
        threading.Thread(target=corrupter, args=(mine(["wild_code", "huge_name", "cycle"]),), name="hostile-code"),
    ]
    for t in threads:
        t.start()
    ready = threading.Event()
    newest = threading.Thread(target=thread_list_corrupter, args=(ready,), name="hostile-threads")
    newest.start()  # the last one started: the head of the thread list
    ready.wait()
    threads.append(newest)
    print("ready", flush=True)
    while not stop.is_set():
        collect()
        stop.wait(0.2)
    for t in threads:
        t.join()
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
