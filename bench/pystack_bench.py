"""pystack overhead.

Usage: pystack_bench.py PYSTACK PYTHON ROUNDS SECONDS

1. Throughput: two workloads run for the whole benchmark, one with 1 thread and one
   with 4 threads, each thread recursing 30 frames deep and then counting loops. Each
   reports (time, loops, its CPU time) every 0.2 s. Each round measures a window
   without pystack, then starts "pystack -p A -p B -F 99" and, once it is ready,
   measures a window with it, then stops it. Rates are loops per CPU second of the
   workload (the machine is shared, so wall-clock rates follow other people's load;
   the sampler's BPF time is charged to the interrupted workload's CPU time).
   Printed: per round and the median ratio sampled/plain (1.0 = no overhead).
2. Cost per sample: kernel.bpf_stats_enabled=1, then pystack on a one-thread workload
   at depth 30 and at depth 120 (-F 499); run_time_ns / run_cnt of its BPF program.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

WORKLOAD = r'''
import sys, threading, time
THREADS, DEPTH = int(sys.argv[1]), int(sys.argv[2])
count = [0] * THREADS
def bottom(i):
    while True:
        x = 0
        for _ in range(1000):
            x += 1
        count[i] += 1000
def rec(k, i):
    return bottom(i) if k <= 1 else rec(k - 1, i)
for i in range(THREADS):
    threading.Thread(target=rec, args=(DEPTH - 3, i), daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.2)
    print(time.monotonic(), sum(count), time.process_time(), flush=True)
'''


class Workload:
    def __init__(self, py, threads, depth):
        self.proc = subprocess.Popen([py, "-c", WORKLOAD, str(threads), str(depth)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t, n, cpu = line.split()
            with self.lock:
                self.samples.append((float(t), int(n), float(cpu)))

    def rate(self, t0, t1):
        with self.lock:
            s = [x for x in self.samples if t0 <= x[0] <= t1]
        if len(s) < 2 or s[-1][2] <= s[0][2]:
            return 0.0
        return (s[-1][1] - s[0][1]) / (s[-1][2] - s[0][2])

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def start_pystack(tool, pids, *extra):
    args = [tool, "-F", "99"] + [a for p in pids for a in ("-p", str(p))] + list(extra)
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    buf = ""
    while "Hit Ctrl-C" not in buf:
        line = p.stderr.readline()
        if not line:
            raise SystemExit("pystack did not start: " + buf)
        buf += line
    p.rest = []
    threading.Thread(target=lambda: p.rest.append(p.stderr.read()), daemon=True).start()
    return p


def summary_samples(p):
    """samples= from pystack's summary on stderr (after it exited)."""
    for _ in range(50):
        if p.rest:
            break
        time.sleep(0.1)
    for word in "".join(p.rest).split():
        if word.startswith("samples="):
            return int(word[8:])
    return 0


def window(secs):
    t0 = time.monotonic()
    time.sleep(secs)
    return t0, time.monotonic()


def throughput(tool, py, rounds, secs):
    loads = {"1 thread": Workload(py, 1, 30), "4 threads": Workload(py, 4, 30)}
    ratios = {k: [] for k in loads}
    try:
        time.sleep(1)
        for r in range(rounds):
            # alternate the order, so that drift and the compile's aftermath hit both sides
            if r % 2 == 0:
                plain = window(secs)
            p = start_pystack(tool, [w.proc.pid for w in loads.values()])
            time.sleep(1)
            sampled = window(secs)
            p.terminate()
            p.wait()
            if r % 2 == 1:
                time.sleep(1)
                plain = window(secs)
            for name, w in loads.items():
                a, b = w.rate(*plain), w.rate(*sampled)
                ratios[name].append(b / a if a else 0.0)
                print("   round %d %-9s plain %10.0f loops/cpu-s  sampled %10.0f  ratio %.3f"
                      % (r + 1, name, a, b, ratios[name][-1]), flush=True)
    finally:
        for w in loads.values():
            w.stop()
    for name, v in ratios.items():
        print("   %-9s pystack 99 Hz / none: median %.3f (%d rounds)" % (name, statistics.median(v), len(v)))


def prog_stats(pid):
    """(run_time_ns, run_cnt) of the perf_event BPF program that process pid holds."""
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-prog":
                continue
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue
        ids = [l.split()[1] for l in info.splitlines() if l.startswith("prog_id:")]
        if not ids:
            continue
        out = subprocess.run(["bpftool", "prog", "show", "id", ids[0], "-j"], capture_output=True,
                             text=True).stdout
        prog = json.loads(out or "{}")
        if prog.get("type") == "perf_event":
            return prog.get("run_time_ns", 0), prog.get("run_cnt", 0)
    return 0, 0


def cost_per_sample(tool, py, secs):
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        # the program also runs for every sample of other processes (and returns at the
        # first map lookup): measure that cost on a target that sleeps, then take it out
        idle = subprocess.Popen([py, "-c", "import time; time.sleep(3600)"])
        time.sleep(0.5)
        p = start_pystack(tool, [idle.pid], "-F", "499")
        time.sleep(secs)
        ns, cnt = prog_stats(p.pid)
        p.terminate()
        p.wait()
        idle.kill()
        idle.wait()
        other = ns / cnt if cnt else 0.0
        print("   other processes' samples: %d runs, %.2f us per run" % (cnt, other / 1000), flush=True)
        for depth in (30, 120):
            w = Workload(py, 1, depth)
            p = start_pystack(tool, [w.proc.pid], "-F", "499", "--max-depth", "128")
            time.sleep(secs)
            ns, cnt = prog_stats(p.pid)
            p.terminate()
            p.wait()
            w.stop()
            n = summary_samples(p)
            per = (ns - other * (cnt - n)) / n / 1000 if n else 0.0
            print("   depth %3d: %d runs, %d of the target: %.1f us per target sample (bpf_stats)"
                  % (depth, cnt, n, per), flush=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)


def main():
    tool, py, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print("   workload: %s" % py)
    throughput(tool, py, rounds, secs)
    cost_per_sample(tool, py, secs)


if __name__ == "__main__":
    main()
