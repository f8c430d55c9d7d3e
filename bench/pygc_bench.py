"""pygc overhead: a workload doing thousands of generation-0 collections per second,
its throughput with pygc attached over without, rounds interleaved in one run.

Usage: pygc_bench.py PYGC ROUNDS SECONDS NAME=PYTHON...
One workload process per interpreter runs for the whole benchmark and reports its
progress (allocation loops, gen-0 collections, its CPU time) every 0.2 s; each round
measures a window without pygc and one with pygc -p attached (after it is ready), in
alternating order. Rates are per CPU second of the workload. Prints per
round and the median of the ratios (traced / plain), and pygc's own CPU use.
"""
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

WORKLOAD = r'''
import gc, sys, time
class N:
    pass
n = 0
last = time.monotonic()
print("ready", flush=True)
while True:
    for _ in range(1000):
        a = N(); b = N(); a.o = b; b.o = a
    n += 1000
    now = time.monotonic()
    if now - last >= 0.2:
        print(now, n, gc.get_stats()[0]["collections"], time.process_time(), flush=True)
        last = now
'''


class Workload:
    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd + ["-c", WORKLOAD], stdout=subprocess.PIPE, text=True,
                                     preexec_fn=lambda: pin(0))
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            t, n, g, cpu = line.split()
            with self.lock:
                self.samples.append((float(t), int(n), int(g), float(cpu)))

    def rate(self, t0, t1):
        """(loops per CPU second, gen-0 collections per CPU second) between the first and
        last samples inside [t0, t1]. Per CPU second of the workload, not per wall second:
        the other engineers' load on this shared machine changes how much CPU it gets,
        while the probes' cost (traps into the kernel) is charged to its own CPU time."""
        with self.lock:
            s = [x for x in self.samples if t0 <= x[0] <= t1]
        if len(s) < 2:
            return 0.0, 0.0
        dt = s[-1][3] - s[0][3]
        return (s[-1][1] - s[0][1]) / dt, (s[-1][2] - s[0][2]) / dt

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def pin(which):
    """Workload on the first CPU, pygc on the second (when there are two): the other
    builds on this shared machine then disturb both windows alike, and pygc's own
    work (its CPU use is printed) does not compete with the workload for a CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[which]})


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def traced_window(pygc, w, secs):
    extra = os.environ.get("PYGC_BENCH_ARGS", "").split()  # e.g. "-g 2": probes fire, nothing is sent
    tool = subprocess.Popen([pygc, "-j", "-p", str(w.proc.pid)] + extra, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: pin(1))
    err = ""
    while "Hit Ctrl-C" not in err:
        line = tool.stderr.readline()
        if not line:
            raise SystemExit("pygc did not start: " + err)
        err += line
    time.sleep(0.3)
    c0, t0 = cpu_seconds(tool.pid), time.monotonic()
    time.sleep(secs)
    t1 = time.monotonic()
    c1 = cpu_seconds(tool.pid)
    tool.send_signal(signal.SIGINT)
    rest = tool.communicate(timeout=60)[1]
    lost = [l for l in rest.splitlines() if "pygc_summary" in l]
    return t0, t1, (c1 - c0) / (t1 - t0), lost[-1] if lost else ""


def main():
    pygc, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    # on a shared machine the others' load moves both columns: say how loaded it was
    print("   load average %.1f on %d CPUs (noise grows with it; compare the medians)" % (
        os.getloadavg()[0], os.cpu_count()))
    for spec in sys.argv[4:]:
        name, _, cmd = spec.partition("=")
        if not os.path.exists(cmd.split()[0]):
            print("   %s: %s not installed, skipped" % (name, cmd))
            continue
        w = Workload(cmd.split())
        time.sleep(1)
        print("   %s (%s)" % (name, cmd))
        print("   %-6s %15s %15s %8s %8s %7s %12s %9s" % (
            "round", "plain loops/cpu-s", "traced loops/cpu-s", "gen0/cpu-s", "traced", "ratio",
            "us/collection", "pygc cpu"))
        ratios, costs = [], []
        try:
            for r in range(1, rounds + 1):
                if r % 2 == 0:
                    a, b, cpu, summary = traced_window(pygc, w, secs)
                    time.sleep(0.5)
                t0 = time.monotonic()
                time.sleep(secs)
                plain, plain_gc = w.rate(t0, time.monotonic())
                if r % 2 == 1:
                    a, b, cpu, summary = traced_window(pygc, w, secs)
                traced, traced_gc = w.rate(a, b)
                ratio = traced / plain if plain else 0
                ratios.append(ratio)
                # the added cost per collection, from the collection rates per CPU second
                extra = (1 / traced_gc - 1 / plain_gc) * 1e6 if plain_gc and traced_gc else 0
                costs.append(extra)
                print("   %-6d %15.0f %15.0f %8.0f %8.0f %7.3f %12.1f %8.1f%%" % (
                    r, plain, traced, plain_gc, traced_gc, ratio, extra, 100 * cpu))
        finally:
            w.stop()
        print("   %s: median [min-max] throughput ratio traced/plain = %.3f [%.3f-%.3f], added cost "
              "%.1f [%.1f-%.1f] us per collection (%d rounds of %.0f s)" % (
                  name, statistics.median(ratios), min(ratios), max(ratios),
                  statistics.median(costs), min(costs), max(costs), rounds, secs))


main()
