"""pystack next to CPython's own sampling profiler and BCC's profile, on one anchor workload.

Usage: pystack_peers.py PYSTACK PYTHON3.15 ROUNDS SECONDS

The anchor workload (sid's python3.15, which profiling.sampling needs: same minor
version as its target): one thread 24 frames deep that calls a() and b() in turn, both
running the same work() for 70,000 and 30,000 iterations, so a() takes 0.70 of the CPU
(the target also times both with thread_time and prints its own split, the truth
printed next to 0.70). It prints (time, loops, its CPU time) every 0.2 s.

Profilers, each at its rate, in interleaved pairs of SECONDS-long windows (one without
a profiler, one with it, the order alternating by round; every profiler has a pair in
each round):
  pystack -F 99 -f and -F 999 -f, python3.15 -m profiling.sampling attach --mode cpu
  -a -r 99 and -r 1000 --collapsed (-a: every thread, the workload's is not the main one), BCC profile-bpfcc -F 999 -f -p (no Python frames).
Per profiler: the target's throughput with it / without it (loops per CPU second of the
target, so that other sessions' load on the machine cancels out, while sampling
interrupts charged to the target count), median [min-max] over the pairs kept; the
profiler's own CPU seconds per second (user + system, /proc/PID/stat); the share of a()
among a() and b() in its output and its error against 0.70; its own count of failed
samples (pystack: errors + lost + missed of its summary; profiling.sampling: its error
rate times its samples, plus the samples it says it missed; BCC: the stack traces it says it lost).

This host flips for seconds at a time between a fast regime and one about 40% slower:
a pair is dropped when either window's two halves differ by more than 15% (it straddles
a flip), and the table says how many were.
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "targets")
# argv[1]: TARGETS, for its timed_callers module
WORKLOAD = r'''
import sys, threading, time
sys.path.insert(0, sys.argv[1])
from timed_callers import TimedCallers
DEPTH = 24
def work(n):
    s = 0
    for i in range(n):
        s += i
    return s
def a():
    return work(70000)
def b():
    return work(30000)
timed = TimedCallers([("a", a), ("b", b)], clock=time.thread_time_ns)
def bottom():
    for call in timed.forever():
        call()
# DEPTH - 2 distinct functions above bottom() and the thread's own frame
N = DEPTH - 2
exec("".join("def f%d():\n    return f%d()\n" % (k, k + 1) for k in range(N - 1))
     + "def f%d():\n    return bottom()\n" % (N - 1))
threading.Thread(target=f0, daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.2)
    print(time.monotonic(), timed.loops, time.process_time(), timed.spent["a"], timed.spent["b"], flush=True)
'''


class Workload:
    def __init__(self, py):
        self.proc = subprocess.Popen(py + ["-c", WORKLOAD, TARGETS], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            f = line.split()
            if len(f) != 5:
                continue  # cut short when the workload is killed
            with self.lock:
                self.samples.append((float(f[0]), int(f[1]), float(f[2]), int(f[3]), int(f[4])))

    def window(self, t0, t1):
        with self.lock:
            return [x for x in self.samples if t0 <= x[0] <= t1]

    def rate(self, t0, t1):
        """Loops per CPU second of the workload between t0 and t1."""
        s = self.window(t0, t1)
        if len(s) < 2 or s[-1][2] <= s[0][2]:
            return 0.0
        return (s[-1][1] - s[0][1]) / (s[-1][2] - s[0][2])

    def flipped(self, t0, t1):
        """Whether the window's halves ran at rates more than 15% apart."""
        mid = (t0 + t1) / 2
        r1, r2 = self.rate(t0, mid), self.rate(mid, t1)
        return not r1 or not r2 or max(r1, r2) / min(r1, r2) > 1.15

    def true_share(self, t0, t1):
        s = self.window(t0, t1)
        if len(s) < 2:
            return None
        da, db = s[-1][3] - s[0][3], s[-1][4] - s[0][4]
        return da / (da + db) if da + db else None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def cpu_seconds(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def attached(pid):
    """Whether process pid holds a BPF program and a perf event per CPU (BCC's profile)."""
    links = []
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                links.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
            except OSError:
                pass
    except OSError:
        return False
    return "anon_inode:bpf-prog" in links and links.count("anon_inode:[perf_event]") >= os.cpu_count()


def share_from_folded(text, a_re, b_re):
    """a's share among samples with a() or b() on the stack, from 'frames count' lines."""
    na = nb = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        if any(a_re.match(f) for f in frames):
            na += int(n)
        elif any(b_re.match(f) for f in frames):
            nb += int(n)
    return na / (na + nb) if na + nb else None


class Profiler:
    """One profiler run against pid: start() returns when it samples; stop() its results."""

    def __init__(self, name, argv, out_path=None, bcc=False):
        self.name, self.argv, self.out_path, self.bcc = name, argv, out_path, bcc

    def start(self, pid, secs):
        argv = [a.replace("PID", str(pid)).replace("SECS", str(int(secs + 30))) for a in self.argv]
        self.stdout = tempfile.TemporaryFile(mode="w+")
        self.stderr = tempfile.TemporaryFile(mode="w+")
        # SIGINT ends each of them with its results: not ignored even when this bench runs
        # in the background of a shell (which starts it with SIGINT ignored)
        self.proc = subprocess.Popen(argv, stdout=self.stdout, stderr=self.stderr, text=True,
                                     env=bcc_env() if self.bcc else None,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.bcc and attached(self.proc.pid):
                break
            if not self.bcc and self.name.startswith("pystack"):
                self.stderr.seek(0)
                if "Hit Ctrl-C" in self.stderr.read():
                    break
            if self.name.startswith("profiling") and time.monotonic() > deadline - 118:
                break  # it samples about 1.3 s after its start, and says nothing
            time.sleep(0.05)
        time.sleep(0.5)
        self.cpu0 = cpu_seconds(self.proc.pid)

    def stop(self, secs):
        self.cpu = (cpu_seconds(self.proc.pid) - self.cpu0) / secs
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.seek(0)
        self.stderr.seek(0)
        out, err = self.stdout.read(), self.stderr.read()
        if self.out_path and os.path.exists(self.out_path):
            with open(self.out_path) as f:
                out = f.read()
            os.unlink(self.out_path)
        return out, err


def bcc_env():
    env = dict(os.environ)
    if env.get("PROFILE_KERNEL_SOURCE"):
        env["BCC_KERNEL_SOURCE"] = env["PROFILE_KERNEL_SOURCE"]
    return env


PYSTACK_A = re.compile(r"^a \(")
PYSTACK_B = re.compile(r"^b \(")
CPY_A = re.compile(r".*:a:\d+$")
CPY_B = re.compile(r".*:b:\d+$")


def results(prof, out, err):
    """(a-share, failed samples) from a profiler's output."""
    if prof.name.startswith("pystack"):
        m = dict(re.findall(r"(\w+)=(\d+)", err))
        failed = sum(int(m.get(k, 0)) for k in ("errors", "lost", "missed"))
        return share_from_folded(out, PYSTACK_A, PYSTACK_B), failed
    if prof.name.startswith("profiling"):
        n = re.search(r"Captured (\d+) samples", out + err)
        rate = re.search(r"Error rate: ([\d.]+)", out + err)
        missed = re.search(r"missed (\d+) samples", out + err)
        failed = round(int(n.group(1)) * float(rate.group(1)) / 100) if n and rate else None
        if missed:
            failed = (failed or 0) + int(missed.group(1))
        with open(prof.collapsed) as f:
            text = f.read()
        os.unlink(prof.collapsed)
        return share_from_folded(text, CPY_A, CPY_B), failed
    lost = re.findall(r"(\d+) stack traces? (?:lost|could not be displayed)", err)
    return None, sum(int(x) for x in lost)


def profilers(tool, py315, tmp):
    profs = [Profiler("pystack -F 99", [tool, "-F", "99", "-f", "-p", "PID"]),
             Profiler("pystack -F 999", [tool, "-F", "999", "-f", "-p", "PID"])]
    for hz, label in ((99, "99"), (1000, "1000")):
        p = Profiler("profiling.sampling -r " + label,
                     py315 + ["-m", "profiling.sampling", "attach", "-a", "-r", label, "--mode", "cpu",
                              "--collapsed", "-o", os.path.join(tmp, "c%d.txt" % hz), "-d", "SECS", "PID"])
        p.collapsed = os.path.join(tmp, "c%d.txt" % hz)
        profs.append(p)
    if shutil.which("profile-bpfcc"):
        profs.append(Profiler("BCC profile -F 999", ["profile-bpfcc", "-F", "999", "-f", "-p", "PID"], bcc=True))
    else:
        print("   profile-bpfcc: left out, not installed (apt-get install bpfcc-tools)")
    return profs


def main(make_profilers=profilers):
    tool, py315, rounds, secs = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), float(sys.argv[4])
    tmp = tempfile.mkdtemp(prefix="pystack_peers.")
    profs = make_profilers(tool, py315, tmp)
    w = Workload(py315)
    rows = {p.name: {"ratio": [], "dropped": 0, "cpu": [], "share": [], "failed": 0, "truth": []} for p in profs}
    try:
        time.sleep(1)
        for r in range(rounds):
            for p in profs:
                if r % 2 == 0:
                    plain = (time.monotonic(), time.sleep(secs) or time.monotonic())
                p.start(w.proc.pid, secs)
                sampled = (time.monotonic(), time.sleep(secs) or time.monotonic())
                out, err = p.stop(secs)
                if r % 2 == 1:
                    time.sleep(0.5)
                    plain = (time.monotonic(), time.sleep(secs) or time.monotonic())
                row = rows[p.name]
                share, failed = results(p, out, err)
                a, b = w.rate(*plain), w.rate(*sampled)
                flip = w.flipped(*plain) or w.flipped(*sampled)
                if flip or not a:
                    row["dropped"] += 1
                else:
                    row["ratio"].append(b / a)
                row["cpu"].append(p.cpu)
                if share is not None:
                    row["share"].append(share)
                truth = w.true_share(*sampled)
                if truth is not None:
                    row["truth"].append(truth)
                row["failed"] += failed or 0
                print("   round %d %-26s plain %7.1f loops/cpu-s  with %7.1f  ratio %.3f%s  cpu %.3f  a %s"
                      % (r + 1, p.name, a, b, b / a if a else 0, " (flip: dropped)" if flip else "",
                         p.cpu, "%.3f" % share if share is not None else "-"), flush=True)
    finally:
        w.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("   %-26s %-24s %6s %9s %7s %7s %8s %7s" % ("profiler", "throughput (median [min-max])", "pairs",
                                                      "CPU s/s", "a-share", "error", "truth", "failed"))
    for p in profs:
        row = rows[p.name]
        v = row["ratio"]
        thr = "%.3f [%.3f-%.3f]" % (statistics.median(v), min(v), max(v)) if v else "-"
        share = statistics.median(row["share"]) if row["share"] else None
        truth = statistics.median(row["truth"]) if row["truth"] else None
        print("   %-26s %-24s %3d/%-2d %9.3f %7s %7s %8s %7d" % (
            p.name, thr, len(v), len(v) + row["dropped"], statistics.median(row["cpu"]),
            "%.3f" % share if share is not None else "-",
            "%+.3f" % (share - 0.70) if share is not None else "-",
            "%.3f" % truth if truth is not None else "-", row["failed"]), flush=True)
    print("   (throughput: the target's loops per CPU second with the profiler / without; pairs: kept/all,"
          " a pair whose window straddles a speed flip of the host is dropped; truth: the target's own"
          " a() share by thread_time)")


if __name__ == "__main__":
    main()
