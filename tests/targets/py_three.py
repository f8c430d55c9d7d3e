"""Sampler bias target: three callers in a row, first(), second() and third(), each
calling the same work() (equal work by default), timed by the target itself with
time.thread_time_ns() around each call: the ground truth a sampler's shares are held
against. A sampler whose instants correlate with the loop (a fixed period locking onto
the loop or onto the host's timer) gives the callers shares that differ from it by
position.

usage: py_three.py [--wait] [--log FILE] [--tick MS] [N1 N2 N3]   (prints "ready"; SIGUSR1 restarts
the measurement; SIGTERM prints {"first": ns, "second": ns, "third": ns} as JSON and
exits. --wait: start only after a line on stdin. --log: also write, at the end, one line
per call "caller start_ns end_ns" in CLOCK_MONOTONIC (what bpf_ktime_get_ns reads), so
that a sample's time can be placed in the call that ran then. --tick: each loop starts
at the next multiple of MS milliseconds of CLOCK_MONOTONIC, as in a program driven by a
timer, and sleeps for the rest: a sampler whose period is MS, or divides it, then hits
the same place of the loop every time.)
"""
import json
import signal
import sys
import time

args = [a for a in sys.argv[1:] if a != "--wait"]
log_path = None
if "--log" in args:
    i = args.index("--log")
    log_path = args[i + 1]
    del args[i:i + 2]
tick_ns = None
if "--tick" in args:
    i = args.index("--tick")
    tick_ns = int(float(args[i + 1]) * 1e6)
    del args[i:i + 2]
N1, N2, N3 = (int(x) for x in args) if len(args) == 3 else (20000, 20000, 20000)
spent = {"first": 0, "second": 0, "third": 0}
log = [] if log_path else None


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


def first():
    return work(N1)


def second():
    return work(N2)


def third():
    return work(N3)


def stop(signum, frame):
    if log is not None:
        with open(log_path, "w") as f:
            f.write("".join("%s %d %d\n" % e for e in log))
    print(json.dumps(spent), flush=True)
    sys.exit(0)


def restart(signum, frame):
    for k in spent:
        spent[k] = 0
    if log is not None:
        del log[:]


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR1, restart)
print("ready", flush=True)
if "--wait" in sys.argv:
    sys.stdin.readline()
clock = time.thread_time_ns
mono = time.monotonic_ns
while True:
    if tick_ns:
        time.sleep((tick_ns - mono() % tick_ns) / 1e9)
    m0 = mono() if log is not None else 0
    t0 = clock()
    first()
    t1 = clock()
    m1 = mono() if log is not None else 0
    second()
    t2 = clock()
    m2 = mono() if log is not None else 0
    third()
    t3 = clock()
    m3 = mono() if log is not None else 0
    spent["first"] += t1 - t0
    spent["second"] += t2 - t1
    spent["third"] += t3 - t2
    if log is not None:
        log.append(("first", m0, m1))
        log.append(("second", m1, m2))
        log.append(("third", m2, m3))
