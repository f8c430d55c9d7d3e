"""pygil overhead: throughput of GIL-heavy workloads with pygil attached over without.

Usage: pygil_bench.py PYGIL ROUNDS SECONDS HOOK=PYTHON...
(HOOK: futex, take_gil or condvar, given to pygil as --hook.)
Per interpreter, three workload processes run in turn, each for the whole of its
benchmark, and report their progress every 0.2 s: "cpu4", four threads spinning in
Python (forced switches every 5 ms); "io", four thread pairs bouncing a byte over
socketpairs (every recv and send releases and retakes the GIL: the worst case, a GIL
handoff per system call and nothing else); and "http", the standard library's
ThreadingHTTPServer (a thread per connection) answering wrk's 8 keep-alive
connections, its work the requests it served. Each round measures a window without
pygil, one with pygil -p (stacks, the default threshold) and one with --no-stacks, in
rotating order. Rates are per CPU second of the workload (the uprobes' traps are
charged to it; the others' load on a shared machine changes how much CPU it gets).
BPF time per wait comes from the kernel's run-time statistics
(kernel.bpf_stats_enabled, set for a second window after each one with pygil, and
restored) of pygil's programs, over the waits it saw in it; BPF share is their run
time in that window over the workload's CPU time in it. The programs run in the
context of the threads whose calls they see, so that share is pygil's programs' cost
to the workload, and it is steady where the throughput ratio is not (the io and http
workloads move between modes of their own). It counts every futex call on the host,
not only the workload's, and the statistics' own clock reads (which is why the
throughput windows run without them). For the futex hook a fourth window has, instead
of pygil, two programs on the same tracepoints that only find out whether the caller
is the target (FLOOR): the share that any program on them costs, whatever it does.
"""
import json
import os
import re
import shutil
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
port = 0
if mode == "cpu4":
    for i in range(4):
        threading.Thread(target=spin, args=(i,), daemon=True).start()
elif mode == "io":
    for i in range(4):
        a, b = socket.socketpair()
        threading.Thread(target=serve, args=(i, a), daemon=True).start()
        threading.Thread(target=client, args=(i, b), daemon=True).start()
else:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    served = {}  # requests by thread: no two threads write one key
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a thread per connection
        # headers and body go out in two writes: with Nagle's algorithm the second
        # would wait for the client's delayed ACK (40 ms a request)
        disable_nagle_algorithm = True
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")
            me = threading.get_ident()
            served[me] = served.get(me, 0) + 1
        def log_message(self, *args):
            pass
    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # the resets of wrk's connections when it is killed
    server = Server(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
print("ready", port, flush=True)
while True:
    time.sleep(0.2)
    # list(): one copy of the values while threads may add keys
    done = sum(counts) if mode != "http" else sum(list(served.values()))
    print(time.monotonic(), done, time.process_time(), flush=True)
'''


class Workload:
    def __init__(self, cmd, mode):
        self.proc = subprocess.Popen(cmd + ["-c", WORKLOAD, mode], stdout=subprocess.PIPE, text=True)
        ready, port = self.proc.stdout.readline().split()
        assert ready == "ready"
        self.load = None
        if mode == "http":  # wrk's keep-alive connections, for as long as the workload runs
            self.load = subprocess.Popen(["wrk", "-t", "2", "-c", "8", "-d", "1000000s",
                                          "http://127.0.0.1:%s/" % port], stdout=subprocess.DEVNULL)
        self.samples = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if len(line.split()) != 3:
                continue  # the last line, cut as the workload is killed
            t, n, cpu = line.split()
            with self.lock:
                self.samples.append((float(t), int(n), float(cpu)))

    def _between(self, t0, t1):
        with self.lock:
            s = [x for x in self.samples if t0 <= x[0] <= t1]
        return (s[0], s[-1]) if len(s) >= 2 and s[-1][2] > s[0][2] else None

    def rate(self, t0, t1):
        """Work per CPU second of the workload between the samples inside [t0, t1]."""
        s = self._between(t0, t1)
        return (s[1][1] - s[0][1]) / (s[1][2] - s[0][2]) if s else 0.0

    def cpu_window(self, t0, t1):
        """(first, last) sample time and CPU seconds between them, within [t0, t1]."""
        s = self._between(t0, t1)
        return (s[0][0], s[1][0], s[1][2] - s[0][2]) if s else None

    def stop(self):
        for p in (self.load, self.proc):
            if p:
                p.kill()
                p.wait()


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


def set_bpf_stats(on):
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1" if on else "0")


# The floor: what any BPF program on the futex tracepoints costs this workload. Two
# programs on them that only look the caller's tgid up in an array, as pygil's first
# step does (the workload's tgid in it), loaded with BCC's Python bindings.
FLOOR = r"""
import signal, sys, time
from bcc import BPF
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with it ignored
b = BPF(text='''
BPF_ARRAY(targets, u32, 4096);
static __always_inline int target(void) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32, slot = tgid % 4096, *t = targets.lookup(&slot);
    return t && *t == tgid;
}
TRACEPOINT_PROBE(syscalls, sys_enter_futex) { return target(); }
TRACEPOINT_PROBE(syscalls, sys_exit_futex) { return target(); }
''')
tgid = int(sys.argv[1])
b["targets"][b["targets"].Key(tgid % 4096)] = b["targets"].Leaf(tgid)
print("Hit Ctrl-C", file=sys.stderr, flush=True)
try:
    time.sleep(3600)
except KeyboardInterrupt:
    pass
"""


def measured_window(w, tracer, secs):
    """Throughput over secs, then the BPF share over 1 s, with tracer running (a
    started process that prints "Hit Ctrl-C" once its programs are attached), which
    then gets a SIGINT. Returns the rate, the BPF run time (ns) and share in the
    statistics' window, that window's length, the seconds from attached to SIGINT, and
    what tracer printed on stderr."""
    err = ""
    while "Hit Ctrl-C" not in err:
        line = tracer.stderr.readline()
        if not line:
            raise SystemExit("%s did not start: %s" % (tracer.args[0], err))
        err += line
    ready = time.monotonic()
    time.sleep(0.3)
    t0 = time.monotonic()
    time.sleep(secs)
    t1 = time.monotonic()
    set_bpf_stats(True)
    ns0, _ = prog_stats(tracer.pid)
    s0 = time.monotonic()
    time.sleep(1)
    ns1, _ = prog_stats(tracer.pid)
    s1 = time.monotonic()
    set_bpf_stats(False)
    # the CPU samples span a little less than [s0, s1]: their CPU time scaled to it
    cpu = w.cpu_window(s0, s1)
    share = (ns1 - ns0) / 1e9 / ((s1 - s0) / (cpu[1] - cpu[0]) * cpu[2]) if cpu else None
    tracer.send_signal(signal.SIGINT)
    attached = time.monotonic() - ready
    err += tracer.communicate(timeout=60)[1]
    return w.rate(t0, t1), ns1 - ns0, share, s1 - s0, attached, err


def floor_window(w, secs):
    tracer = subprocess.Popen(["/usr/bin/python3", "-c", FLOOR, str(w.proc.pid)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    rate, _, share, _, _, _ = measured_window(w, tracer, secs)
    return rate, (0, 0, share)


def traced_window(pygil, w, secs, extra):
    tool = subprocess.Popen([pygil, "-j", "-p", str(w.proc.pid)] + extra, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    rate, ns, share, stats_secs, attached, err = measured_window(w, tool, secs)
    m = re.search(r"events=(\d+) map_full=\d+ short_waits=(\d+)", err)
    waits = int(m.group(1)) + int(m.group(2)) if m else 0
    # the waits counted over the tool's life, the part of them in the statistics' window
    return rate, (ns, waits * stats_secs / attached, share)


def main():
    pygil, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats_path) as f:
        stats_was = f.read().strip()
    set_bpf_stats(False)
    print("   load average %.1f on %d CPUs (noise grows with it; compare the medians)" % (
        os.getloadavg()[0], os.cpu_count()))
    try:
        for spec in sys.argv[4:]:
            name, _, cmd = spec.partition("=")
            if not os.path.exists(cmd.split()[0]):
                print("   %s: %s not installed, skipped" % (name, cmd))
                continue
            for mode in ("cpu4", "io", "http"):
                if mode == "http" and not shutil.which("wrk"):
                    print("   %s http: skipped, needs wrk (make deps)" % name)
                    continue
                bench_one(pygil, rounds, secs, name, cmd.split(), mode)
    finally:
        with open(stats_path, "w") as f:
            f.write(stats_was)


def bench_one(pygil, rounds, secs, name, cmd, mode):
    w = Workload(cmd, mode)
    time.sleep(1)
    hook = ["--hook", name]
    windows = [("plain", lambda: plain_window(w, secs)),
               ("stacks", lambda: traced_window(pygil, w, secs, hook)),
               ("nostacks", lambda: traced_window(pygil, w, secs, hook + ["--no-stacks"]))]
    if name == "futex":
        if os.environ.get("BCC_KERNEL_SOURCE"):
            windows.append(("floor", lambda: floor_window(w, secs)))
        else:
            print("   no kernel headers for BCC (bench/bcc_headers): no floor window")
    rates = {k: [] for k, _ in windows}
    per_wait = {k: [] for k, _ in windows}
    shares = {k: [] for k, _ in windows}
    print("   %s %s (%s): work per CPU second; ratio to plain (BPF share of the workload's CPU)" % (
        name, mode, " ".join(cmd)))
    try:
        for r in range(rounds):
            order = windows[r % len(windows):] + windows[:r % len(windows)]
            got, got_share = {}, {}
            for k, measure in order:
                rate, bpf = measure()
                got[k] = rate
                rates[k].append(rate)
                if bpf and bpf[1]:
                    per_wait[k].append(bpf[0] / bpf[1])
                if bpf and bpf[2] is not None:
                    shares[k].append(bpf[2])
                    got_share[k] = bpf[2]
            print("   round %d: plain %.0f, %s" % (r + 1, got["plain"], ", ".join(
                "%s %.3f (%.2f%%)" % (k, got[k] / got["plain"] if got["plain"] else 0,
                                      100 * got_share.get(k, float("nan"))) for k, _ in windows[1:])))
    finally:
        w.stop()
    ratio = lambda k: statistics.median(a / b for a, b in zip(rates[k], rates["plain"]) if b)
    us = lambda k: statistics.median(per_wait[k]) / 1e3 if per_wait[k] else float("nan")
    pct = lambda k: 100 * statistics.median(shares[k]) if shares[k] else float("nan")
    print("   %s %s: median ratio stacks %.3f, no-stacks %.3f; BPF time per wait (all of pygil's "
          "program runs, also those that found no wait) %.1f us with stacks, %.1f us without; "
          "BPF share of the workload's CPU %.2f%% with stacks, %.2f%% without%s" % (
              name, mode, ratio("stacks"), ratio("nostacks"), us("stacks"), us("nostacks"),
              pct("stacks"), pct("nostacks"),
              "; the floor (programs that only find the target) %.2f%%, ratio %.3f" % (
                  pct("floor"), ratio("floor")) if "floor" in rates else ""))


main()
