"""pygil overhead: throughput of GIL-heavy workloads with pygil attached over without.

Usage: pygil_bench.py PYGIL ROUNDS SECONDS HOOK=PYTHON...
(HOOK: futex, take_gil or condvar, given to pygil as --hook.)
Per interpreter, two workload processes run for the whole benchmark and report their
progress every 0.2 s: "cpu4", four threads spinning in Python (forced switches every
5 ms), and "io", four thread pairs bouncing a byte over socketpairs (every recv and
send releases and retakes the GIL). Each round measures a window without pygil, one
with pygil -p (stacks, the default threshold) and one with --no-stacks, in rotating
order. Rates are per CPU second of the workload (the uprobes' traps are charged to
it; the others' load on a shared machine changes how much CPU it gets). BPF time per
wait comes from the kernel's run-time statistics (kernel.bpf_stats_enabled, set for
the run and restored) of pygil's programs, over the waits it saw.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

WORKLOAD = r'''
import socket, sys, threading, time
mode = sys.argv[1]
counts = [0] * 8
def spin(i):
    while True:
        counts[i] += 1
def serve(i, s):
    while True:
        s.send(s.recv(1))
def client(i, s):
    while True:
        s.send(b"x"); s.recv(1)
        counts[i] += 1
if mode == "cpu4":
    for i in range(4):
        threading.Thread(target=spin, args=(i,), daemon=True).start()
else:
    for i in range(4):
        a, b = socket.socketpair()
        threading.Thread(target=serve, args=(i, a), daemon=True).start()
        threading.Thread(target=client, args=(i, b), daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.2)
    print(time.monotonic(), sum(counts), time.process_time(), flush=True)
'''


class Workload:
    def __init__(self, cmd, mode):
        self.proc = subprocess.Popen(cmd + ["-c", WORKLOAD, mode], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t, n, cpu = line.split()
            with self.lock:
                self.samples.append((float(t), int(n), float(cpu)))

    def rate(self, t0, t1):
        """Work per CPU second of the workload between the samples inside [t0, t1]."""
        with self.lock:
            s = [x for x in self.samples if t0 <= x[0] <= t1]
        if len(s) < 2 or s[-1][2] <= s[0][2]:
            return 0.0
        return (s[-1][1] - s[0][1]) / (s[-1][2] - s[0][2])

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the BPF programs pid holds."""
    ids = set()
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                ids |= {int(l.split()[1]) for l in f if l.startswith("prog_id:")}
        except OSError:
            pass
    ns = cnt = 0
    for i in ids:
        out = subprocess.run(["bpftool", "-j", "prog", "show", "id", str(i)], capture_output=True, text=True)
        p = json.loads(out.stdout or "{}")
        ns += p.get("run_time_ns", 0)
        cnt += p.get("run_cnt", 0)
    return ns, cnt


def plain_window(w, secs):
    t0 = time.monotonic()
    time.sleep(secs)
    return w.rate(t0, time.monotonic()), None


def traced_window(pygil, w, secs, extra):
    tool = subprocess.Popen([pygil, "-j", "-p", str(w.proc.pid)] + extra, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err = ""
    while "Hit Ctrl-C" not in err:
        line = tool.stderr.readline()
        if not line:
            raise SystemExit("pygil did not start: " + err)
        err += line
    time.sleep(0.3)
    t0 = time.monotonic()
    time.sleep(secs)
    t1 = time.monotonic()
    ns, _ = prog_stats(tool.pid)  # since the programs were loaded, as the waits are
    tool.send_signal(signal.SIGINT)
    rest = tool.communicate(timeout=60)[1]
    m = re.search(r"events=(\d+) map_full=\d+ short_waits=(\d+)", rest)
    waits = int(m.group(1)) + int(m.group(2)) if m else 0
    return w.rate(t0, t1), (ns, waits)


def main():
    pygil, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats_path) as f:
        stats_was = f.read().strip()
    with open(stats_path, "w") as f:
        f.write("1")
    print("   load average %.1f on %d CPUs (noise grows with it; compare the medians)" % (
        os.getloadavg()[0], os.cpu_count()))
    try:
        for spec in sys.argv[4:]:
            name, _, cmd = spec.partition("=")
            if not os.path.exists(cmd.split()[0]):
                print("   %s: %s not installed, skipped" % (name, cmd))
                continue
            for mode in ("cpu4", "io"):
                bench_one(pygil, rounds, secs, name, cmd.split(), mode)
    finally:
        with open(stats_path, "w") as f:
            f.write(stats_was)


def bench_one(pygil, rounds, secs, name, cmd, mode):
    w = Workload(cmd, mode)
    time.sleep(1)
    hook = ["--hook", name]
    windows = [("plain", None), ("stacks", hook), ("nostacks", hook + ["--no-stacks"])]
    rates = {k: [] for k, _ in windows}
    per_wait = {"stacks": [], "nostacks": []}
    print("   %s %s (%s): work per CPU second; ratio to plain" % (name, mode, " ".join(cmd)))
    try:
        for r in range(rounds):
            order = windows[r % 3:] + windows[:r % 3]
            got = {}
            for k, extra in order:
                rate, bpf = plain_window(w, secs) if extra is None else traced_window(pygil, w, secs, extra)
                got[k] = rate
                rates[k].append(rate)
                if bpf and bpf[1]:
                    per_wait[k].append(bpf[0] / bpf[1])
            print("   round %d: plain %.0f, stacks %.3f, no-stacks %.3f" % (
                r + 1, got["plain"], got["stacks"] / got["plain"] if got["plain"] else 0,
                got["nostacks"] / got["plain"] if got["plain"] else 0))
    finally:
        w.stop()
    ratio = lambda k: statistics.median(a / b for a, b in zip(rates[k], rates["plain"]) if b)
    us = lambda k: statistics.median(per_wait[k]) / 1e3 if per_wait[k] else float("nan")
    print("   %s %s: median ratio stacks %.3f, no-stacks %.3f; BPF time per wait (all of pygil's "
          "program runs, also those that found no wait) %.1f us with stacks, %.1f us without" % (
              name, mode, ratio("stacks"), ratio("nostacks"), us("stacks"), us("nostacks")))


main()
