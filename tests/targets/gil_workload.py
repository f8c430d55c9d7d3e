"""GIL contention with a ground truth measured inside: pygil's tests and bench.

gil_workload.py MODE SECONDS: prints "ready PID", waits for "go" on stdin, runs MODE for
SECONDS, then prints one JSON line per thread and "done". Modes:
  cpu2    two CPU-bound threads (spinner-a, spinner-b) in spin()
  sleeper one CPU-bound thread (spinner-a) and one (sleeper) in time.sleep(0.01) loops
  one     the main thread spinning alone (no other thread)
  recv    one CPU-bound thread (spinner-a) and one (reader) in blocking socket recv()s
          of a byte a child process sends every 50 ms
  cpu4    four CPU-bound threads (the bench's contended workload)
  churn   one CPU-bound thread (spinner-a) while the main thread starts and joins, one
          after another, short-lived threads (short-1, short-2, ...) that spin 20 ms and
          end: each ends, with no Python frame left, as spinner-a waits for the GIL
With GIL_WORKLOAD_TID_STEP=N (as root) each thread after the first is given a tid N
away from the one before it, if that one is free (/proc/sys/kernel/ns_last_pid).
Each line (a short-lived thread's: name, native_id and loops only): name, native_id, wall (s, from its start to its end), cpu (time.thread_time
delta), run_delay (s runnable but not running, from /proc/thread-self/schedstat), loops
(spin iterations, sleeps or recv returns).
"""
import json
import os
import socket
import sys
import threading
import time

MODE, SECONDS = sys.argv[1], float(sys.argv[2])
results = []


def spin(stop):
    n = 0
    while not stop.is_set():
        n += 1  # SPIN_BODY
        n += 1  # SPIN_BODY
    return n


def sleeper(stop):
    n = 0
    while not stop.is_set():
        time.sleep(0.01)  # SLEEP_LINE
        n += 1
    return n


def reader(stop, sock):
    n = 0
    sock.send(b"g")  # SEND_LINE: the writer starts now, nothing waits in the buffer
    while not stop.is_set():
        if not sock.recv(1) or stop.is_set():  # RECV_LINE
            break  # (the last return may find the spinner gone: not counted)
        n += 1
    return n


def spin_for(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def short_lived(name):
    """Spins 20 ms and ends at once: no I/O (which would drop the GIL with frames) after it."""
    results.append({"name": name, "native_id": threading.get_native_id(), "loops": spin_for(0.02)})


def run_delay():
    """Seconds this thread was runnable but not running (the kernel's schedstat)."""
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def run(name, fn, *args):
    def body():
        w0, c0, r0 = time.monotonic(), time.thread_time(), run_delay()
        loops = fn(*args)
        results.append({"name": name, "native_id": threading.get_native_id(),
                        "wall": time.monotonic() - w0, "cpu": time.thread_time() - c0,
                        "run_delay": run_delay() - r0, "loops": loops})
    return threading.Thread(target=body, name=name)


def place_next_thread(prev_tid):
    """The next thread's tid GIL_WORKLOAD_TID_STEP after (or, past pid_max, before) prev_tid."""
    step = int(os.environ.get("GIL_WORKLOAD_TID_STEP", "0"))
    if not step:
        return
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    tid = prev_tid + step if prev_tid + step < pid_max else prev_tid - step
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(tid - 1))


def main():
    print("ready %d" % os.getpid(), flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    if MODE == "one":
        spin_for(SECONDS)  # the main thread alone: nobody to wait for
        print("done", flush=True)
        return
    stop = threading.Event()
    threads = [run("spinner-a", spin, stop)]
    if MODE == "cpu2":
        threads.append(run("spinner-b", spin, stop))
    elif MODE == "cpu4":
        threads += [run("spinner-" + c, spin, stop) for c in "bcd"]
    elif MODE == "sleeper":
        threads.append(run("sleeper", sleeper, stop))
    elif MODE == "recv":
        a, b = socket.socketpair()
        # a byte every 50 ms from another process: it arrives while spinner-a holds the
        # GIL (a writer thread would hand the GIL to the reader as it sends), and after
        # the reader's previous wait ended (a byte already there is read without blocking,
        # and the GIL it released may still be free when it returns)
        writer = os.fork()
        if writer == 0:
            a.close()
            b.recv(1)
            while True:
                try:
                    b.send(b"x")
                except OSError:
                    os._exit(0)
                time.sleep(0.05)
        b.close()
        threads.append(run("reader", reader, stop, a))
    for t in threads:
        if t is not threads[0]:
            place_next_thread(threads[threads.index(t) - 1].native_id)
        t.start()
    if MODE == "churn":
        end, n = time.monotonic() + SECONDS, 0
        while time.monotonic() < end:
            n += 1
            short = threading.Thread(target=short_lived, args=("short-%d" % n,))
            short.start()
            short.join()
    else:
        time.sleep(SECONDS)
    stop.set()
    for t in threads:
        t.join()
    if MODE == "recv":
        a.close()
        os.kill(writer, 9)
        os.waitpid(writer, 0)
    for r in results:
        print(json.dumps(r), flush=True)
    print("done", flush=True)


main()
