"""pystack overhead: BPF time per sample next to BCC profile's, start-up, throughput.

Usage: pystack_bench.py PYSTACK PYTHON ROUNDS SECONDS   (PYSTACK_BENCH_THROUGHPUT=0: skip 4.)

1. Cost per sample, at 99 Hz (the default) and 499 Hz, with kernel.bpf_stats_enabled=1:
   run_time_ns / run_cnt summed over pystack's BPF programs. Per round: a run on a
   sleeping target (every run is another process's sample: the non-target cost), then
   runs on a one-thread target (nice -20, so that it gets its CPU) whose stack is 30
   and 120 frames of distinct functions: (all BPF time - non-target cost x other runs)
   / the target samples pystack counted. Printed with python_stacks and errors, so a
   walk that stopped early cannot look cheap; median [min-max] over rounds.
2. BCC's profile-bpfcc -F 99 on the same workload: BPF time per run.
3. Start-up: exec to the first sample on stdout (pystack -j) and to "Hit Ctrl-C" for
   pystack; for profile-bpfcc (which prints its banner before it compiles) to holding
   its program and a perf event per CPU.
4. Throughput: two workloads run for the whole benchmark, one with 1 thread and one
   with 4 threads, each 30 frames deep and then counting loops. Each reports (time,
   loops, its CPU time) every 0.2 s. Each round measures a window without pystack,
   then starts "pystack -p A -p B -F 99" and, once it is ready, measures a window with
   it, then stops it. Rates are loops per CPU second of the workload (the machine is
   shared, so wall-clock rates follow other people's load; the sampler's BPF time is
   charged to the interrupted workload's CPU time). Printed: per round and the median
   ratio sampled/plain (1.0 = no overhead).
"""
import json
import os
import shutil
import signal
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
# DEPTH - 3 distinct functions (threading's own frames make up the rest): a walk that
# remembered a code object would look cheaper on a recursion of one function
N = DEPTH - 3
exec("".join("def f%d(i):\n    return f%d(i)\n" % (k, k + 1) for k in range(N - 1))
     + "def f%d(i):\n    return bottom(i)\n" % (N - 1))
for i in range(THREADS):
    threading.Thread(target=f0, args=(i,), daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.2)
    print(time.monotonic(), sum(count), time.process_time(), flush=True)
'''


class Workload:
    def __init__(self, py, threads, depth, nice=0):
        self.proc = subprocess.Popen([py, "-c", WORKLOAD, str(threads), str(depth)],
                                     stdout=subprocess.PIPE, text=True,
                                     preexec_fn=(lambda: os.nice(nice)) if nice else None)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if len(line.split()) != 3:
                continue  # the last line, cut short when the workload is killed
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
    """(run_time_ns, run_cnt) summed over every BPF program process pid holds."""
    fd_dir = "/proc/%d/fd" % pid
    ns = cnt = 0
    seen = set()
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-prog":
                continue
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue
        for l in info.splitlines():
            if l.startswith("prog_id:") and l.split()[1] not in seen:
                seen.add(l.split()[1])
                out = subprocess.run(["bpftool", "prog", "show", "id", l.split()[1], "-j"],
                                     capture_output=True, text=True).stdout
                prog = json.loads(out or "{}")
                ns += prog.get("run_time_ns", 0)
                cnt += prog.get("run_cnt", 0)
    return ns, cnt


def attached(pid):
    """Whether process pid holds a BPF program and a perf event for every CPU."""
    links = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            links.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            pass
    return "anon_inode:bpf-prog" in links and links.count("anon_inode:[perf_event]") >= os.cpu_count()


def summary_of(p):
    """pystack's summary fields (samples=, python_stacks=, errors=...) after it exited."""
    for _ in range(50):
        if p.rest:
            break
        time.sleep(0.1)
    out = {}
    for word in "".join(p.rest).split():
        k, _, v = word.partition("=")
        if v.isdigit():
            out[k] = int(v)
    return out


def spread(v, fmt="%.2f"):
    """median [min-max] of a list."""
    if not v:
        return "-"
    return (fmt + " [" + fmt + "-" + fmt + "]") % (statistics.median(v), min(v), max(v))


def one_cost(tool, py, hz, secs, depth):
    """One pystack run at hz on a target (depth frames busy, or None: asleep): the BPF
    time of all its runs, their count, and its summary."""
    if depth is None:
        w = subprocess.Popen([py, "-c", "import time; time.sleep(3600)"])
        pid = w.pid
        time.sleep(0.3)
    else:
        # at nice -20 the target gets its CPU on a loaded machine: most runs are then
        # its samples, and taking the others' cost out stays a small correction
        w = Workload(py, 1, depth, nice=-20)
        pid = w.proc.pid
    p = start_pystack(tool, [pid], "-F", str(hz), "--max-depth", "128")
    time.sleep(secs)
    # the target stops first, so that the counters read next cover every target
    # sample the summary will count (bpf_stats count from the program's load)
    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.1)
    ns, cnt = prog_stats(p.pid)
    p.terminate()
    p.wait()
    if depth is None:
        w.kill()
        w.wait()
    else:
        w.stop()
    return ns, cnt, summary_of(p)


def cost_per_sample(tool, py, rounds, secs):
    """BPF us per target sample (depth 30, 120) and per run for other processes, at
    99 and 499 Hz, from bpf_stats; each round measures the non-target cost first and
    takes it out of the target runs' total (the program runs for every sample on the
    machine and returns at the first map lookup for other processes)."""
    for hz in (99, 499):
        other, per = [], {30: [], 120: []}
        stacks = {30: [0, 0, 0], 120: [0, 0, 0]}  # samples, python_stacks, errors
        for _ in range(rounds):
            ns, cnt, _ = one_cost(tool, py, hz, secs, None)
            o = ns / cnt if cnt else 0.0
            other.append(o / 1000)
            for depth in (30, 120):
                ns, cnt, summ = one_cost(tool, py, hz, secs, depth)
                n = summ.get("samples", 0)
                if n:
                    per[depth].append((ns - o * (cnt - n)) / n / 1000)
                for k, f in enumerate(("samples", "python_stacks", "errors")):
                    stacks[depth][k] += summ.get(f, 0)
        print("   %3d Hz  non-target run           %s us   (median [min-max] of %d rounds)"
              % (hz, spread(other), rounds), flush=True)
        for depth in (30, 120):
            print("   %3d Hz  target sample, depth %3d %s us   samples %d python_stacks %d errors %d"
                  % (hz, depth, spread(per[depth]), *stacks[depth]), flush=True)
        if per[30] and per[120]:
            extra = [(b - a) / 90 for a, b in zip(per[30], per[120])]
            print("   %3d Hz  per extra frame (120-30)/90 %s us" % (hz, spread(extra, "%.3f")), flush=True)


def bcc_env():
    """BCC cannot find Debian's split headers alone: bench/bcc_headers merged them."""
    env = dict(os.environ)
    if env.get("PROFILE_KERNEL_SOURCE"):
        env["BCC_KERNEL_SOURCE"] = env["PROFILE_KERNEL_SOURCE"]
    return env


def bcc_profile(py, rounds, secs):
    """BCC's profile -F 99 (kernel + user stacks, all processes) on the same workload:
    BPF us per run."""
    if not shutil.which("profile-bpfcc"):
        print("   profile-bpfcc: skipped, not installed (apt-get install bpfcc-tools)")
        return
    w = Workload(py, 1, 30)
    per = []
    try:
        for _ in range(rounds):
            p = subprocess.Popen(["profile-bpfcc", "-F", "99", "-f"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, env=bcc_env())
            time.sleep(1)
            deadline = time.monotonic() + 60
            while not prog_stats(p.pid)[1] and time.monotonic() < deadline:
                time.sleep(0.2)
            ns0, cnt0 = prog_stats(p.pid)
            time.sleep(secs)
            ns, cnt = prog_stats(p.pid)
            p.terminate()
            p.wait()
            if cnt > cnt0:
                per.append((ns - ns0) / (cnt - cnt0) / 1000)
    finally:
        w.stop()
    print("    99 Hz  profile-bpfcc -F 99, per run %s us   (any process; stacks of no use for Python)"
          % spread(per), flush=True)


def startup(tool, py, rounds):
    """Seconds from exec to the first sample on stdout (pystack -j), and to ready
    for pystack ("Hit Ctrl-C") and BCC's profile (program and perf events held)."""
    w = Workload(py, 1, 30)
    first, ready, bcc = [], [], []
    try:
        for _ in range(rounds):
            t0 = time.monotonic()
            p = subprocess.Popen([tool, "-j", "-p", str(w.proc.pid)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            threading.Thread(target=lambda: [ready.append(time.monotonic() - t0) for l in p.stderr
                                             if "Hit Ctrl-C" in l], daemon=True).start()
            line = p.stdout.readline()
            first.append(time.monotonic() - t0)
            assert '"py_stack"' in line, line
            p.terminate()
            p.wait()
            if shutil.which("profile-bpfcc"):
                t0 = time.monotonic()
                b = subprocess.Popen(["profile-bpfcc", "-F", "99"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=bcc_env())
                # profile prints its banner before it compiles: ready is when it holds
                # its program and a perf event per CPU
                while b.poll() is None and time.monotonic() - t0 < 60 and not attached(b.pid):
                    time.sleep(0.01)
                bcc.append(time.monotonic() - t0)
                b.terminate()
                b.wait()
    finally:
        w.stop()
    print("   start-up: pystack to first sample %s s, to ready %s s; profile-bpfcc to ready %s s"
          % (spread(first), spread(ready), spread(bcc)), flush=True)


def main():
    tool, py, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print("   workload: %s" % py)
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        cost_per_sample(tool, py, rounds, secs)
        bcc_profile(py, rounds, secs)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    startup(tool, py, rounds)
    if os.environ.get("PYSTACK_BENCH_THROUGHPUT", "1") != "0":
        throughput(tool, py, rounds, secs)


if __name__ == "__main__":
    main()
