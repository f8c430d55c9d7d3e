"""pyoffcpu overhead.

Usage: pyoffcpu_bench.py PYOFFCPU PYTHON ROUNDS SECONDS

1. Throughput: a workload of 4 pairs of threads handing a token back and forth
   through queue.Queue (every handoff a futex wait and wake: tens of thousands of
   context switches a second) reports (time, handoffs, its CPU time) every 0.2 s.
   Each round measures a window without pyoffcpu; one with "pyoffcpu -f --min-ms 0"
   tracing another process that sleeps (other-folded: every switch of the workload is
   a non-target's); one with "pyoffcpu -p W -j" (events, default --min-ms 20, output
   to /dev/null); one with "pyoffcpu -p W -f --min-ms 0" (folded: every period of the
   workload's threads, with three stacks each, summed in the kernel); alternating order. Rates are
   handoffs per CPU second of the workload (the machine is shared; BPF time of
   sched_switch is charged to the task switching out). Printed: per round and the
   median ratios traced/plain (1.0 = no overhead).
2. BPF time per context switch: kernel.bpf_stats_enabled=1; run_time_ns of the tool's
   three programs (sched_switch, sched_wakeup, sched_wakeup_new) summed, over the
   run count of sched_switch. First with a target that only sleeps (every switch of
   the host is a non-target's), then with the workload as the target.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import pystack_bench

WORKLOAD = r'''
import queue, sys, threading, time
PAIRS = int(sys.argv[1])
count = [0] * (2 * PAIRS)
def player(i, inbox, outbox):
    while True:
        outbox.put(inbox.get())
        count[i] += 1
for k in range(PAIRS):
    a, b = queue.Queue(), queue.Queue()
    threading.Thread(target=player, args=(2 * k, a, b), daemon=True).start()
    threading.Thread(target=player, args=(2 * k + 1, b, a), daemon=True).start()
    a.put(k)
print("ready", flush=True)
while True:
    time.sleep(0.2)
    print(time.monotonic(), sum(count), time.process_time(), flush=True)
'''


class Workload(pystack_bench.Workload):
    """The handoff workload; reading its reports and rates as pystack's bench does."""

    def __init__(self, py, pairs):
        self.proc = subprocess.Popen([py, "-c", WORKLOAD, str(pairs)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()


def start_tool(tool, pid, *extra):
    p = subprocess.Popen([tool, "-p", str(pid)] + list(extra), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    buf = ""
    while "Hit Ctrl-C" not in buf:
        line = p.stderr.readline()
        if not line:
            raise SystemExit("pyoffcpu did not start: " + buf)
        buf += line
    threading.Thread(target=p.stderr.read, daemon=True).start()
    return p


def window(secs):
    t0 = time.monotonic()
    time.sleep(secs)
    return t0, time.monotonic()


MODES = {"events": ["-j"], "folded": ["-f", "--min-ms", "0"]}
# throughput windows: (name, traces the workload itself?, options)
TRACED = [("other-folded", False, MODES["folded"]), ("events", True, MODES["events"]),
          ("folded", True, MODES["folded"])]


def throughput(tool, py, rounds, secs):
    w = Workload(py, 4)
    idle = subprocess.Popen([py, "-c", "import time; time.sleep(3600)"])
    ratios = {name: [] for name, _, _ in TRACED}
    try:
        time.sleep(1)
        for r in range(rounds):
            order = [None] + TRACED if r % 2 == 0 else TRACED[::-1] + [None]
            windows = {}
            for how in order:
                if how is None:
                    windows["plain"] = window(secs)
                    continue
                name, itself, opts = how
                p = start_tool(tool, w.proc.pid if itself else idle.pid, *opts)
                time.sleep(0.5)
                windows[name] = window(secs)
                p.terminate()
                p.wait()
                time.sleep(0.5)
            plain = w.rate(*windows["plain"])
            line = "   round %d plain %9.0f handoffs/cpu-s" % (r + 1, plain)
            for name, _, _ in TRACED:
                traced = w.rate(*windows[name])
                ratios[name].append(traced / plain if plain else 0.0)
                line += "  %s %9.0f (%.3f)" % (name, traced, ratios[name][-1])
            print(line, flush=True)
    finally:
        w.stop()
        idle.kill()
        idle.wait()
    for name, v in ratios.items():
        print("   pyoffcpu %-12s / none: median %.3f (%d rounds)" % (name, statistics.median(v), len(v)))


def prog_stats(pid):
    """{name: (run_time_ns, run_cnt)} of the tracepoint BPF programs process pid holds."""
    out = {}
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
        prog = json.loads(subprocess.run(["bpftool", "prog", "show", "id", ids[0], "-j"],
                                         capture_output=True, text=True).stdout or "{}")
        if prog.get("type") == "tracepoint":
            out[prog.get("name", ids[0]) + ids[0]] = (prog.get("run_time_ns", 0), prog.get("run_cnt", 0))
    return out


def cost_per_switch(tool, py, secs):
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        idle = subprocess.Popen([py, "-c", "import time; time.sleep(3600)"])
        w = Workload(py, 4)
        time.sleep(0.5)
        for what, pid in (("non-target switches (the target sleeps)", idle.pid),
                          ("the workload as target", w.proc.pid)):
            for mode in MODES:
                p = start_tool(tool, pid, *MODES[mode])
                time.sleep(secs)
                stats = prog_stats(p.pid)
                p.terminate()
                p.wait()
                ns = sum(v[0] for v in stats.values())
                switches = max((v[1] for v in stats.values()), default=0)
                print("   %-40s %-6s: %d switches, %.2f us of BPF per switch (bpf_stats)"
                      % (what, mode, switches, ns / switches / 1000 if switches else 0), flush=True)
        w.stop()
        idle.kill()
        idle.wait()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)


def main():
    tool, py, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print("   workload: %s" % py)
    throughput(tool, py, rounds, secs)
    cost_per_switch(tool, py, secs)


if __name__ == "__main__":
    main()
