"""pyloop overhead.

Usage: pyloop_bench.py PYLOOP PYTHON ROUNDS SECONDS

1. Throughput: an asyncio echo ping-pong in one loop (two protocols on a socketpair
   bouncing one message: every bounce is a loop iteration, 20000 or more a second)
   reports (time, bounces, its CPU time) every 0.2 s; a second workload does the same
   and also stalls its loop 5 times a second (alternately 110 ms asleep and 110 ms on
   the CPU, so that every stall is a record with stacks at --min-ms 100). Each round
   measures a window without pyloop and one with "pyloop -p W -j" (output to
   /dev/null), in alternating order; one workload at a time. Rates are bounces per CPU second of the workload
   (the machine is shared; the syscall tracepoints' BPF time is charged to the task
   that makes the syscall). Printed: per round and the median ratios traced/plain.
2. BPF time per iteration: kernel.bpf_stats_enabled=1; run_time_ns of all the tool's
   programs summed, over the iterations the tool counted (its summary's polls), with
   the healthy workload as the target.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import pyoffcpu_bench
import pystack_bench

WORKLOAD = r'''
import asyncio, socket, sys, time
STALLS = sys.argv[1] == "stalls"
count = [0]

class Echo(asyncio.Protocol):
    def connection_made(self, t):
        self.t = t
    def data_received(self, data):
        count[0] += 1
        self.t.write(data)

def busy(s):
    end = time.monotonic() + s
    while time.monotonic() < end:
        pass

async def main():
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    ta, _ = await loop.create_connection(Echo, sock=a)
    await loop.create_connection(Echo, sock=b)
    ta.write(b"x")
    print("ready", flush=True)
    n = 0
    while True:
        await asyncio.sleep(0.2)
        if STALLS:
            n += 1
            time.sleep(0.11) if n % 2 else busy(0.11)
        print(time.monotonic(), count[0], time.process_time(), flush=True)

asyncio.run(main())
'''


class Workload(pystack_bench.Workload):
    def __init__(self, py, kind):
        self.proc = subprocess.Popen([py, "-c", WORKLOAD, kind], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.samples, self.lock = [], threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()


def throughput(tool, py, rounds, secs):
    """One workload at a time (two would share the two CPUs and slow each other)."""
    for name in ("healthy", "stalling"):
        w = Workload(py, "stalls" if name == "stalling" else "healthy")
        ratios = []
        try:
            time.sleep(1)
            for r in range(rounds):
                windows = {}
                for traced in ((False, True) if r % 2 == 0 else (True, False)):
                    if not traced:
                        windows[False] = pyoffcpu_bench.window(secs)
                        continue
                    p = pyoffcpu_bench.start_tool(tool, w.proc.pid, "-j")
                    time.sleep(0.5)
                    windows[True] = pyoffcpu_bench.window(secs)
                    p.terminate()
                    p.wait()
                    time.sleep(0.5)
                plain, traced = w.rate(*windows[False]), w.rate(*windows[True])
                ratios.append(traced / plain if plain else 0.0)
                print("   %s round %d plain %8.0f traced %8.0f bounces/cpu-s (%.3f)"
                      % (name, r + 1, plain, traced, ratios[-1]), flush=True)
            s = w.samples
            print("   %s: %.0f bounces (loop iterations) a second of wall time" % (
                name, (s[-1][1] - s[0][1]) / (s[-1][0] - s[0][0]) if len(s) > 1 else 0))
        finally:
            w.stop()
        print("   pyloop on the %-8s loop / none: median %.3f (%d rounds)" % (name, statistics.median(ratios), len(ratios)))


def prog_stats(pid):
    """Summed (run_time_ns, run_cnt) of the BPF programs process pid holds."""
    ns = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:bpf-prog":
                continue
            info = open("/proc/%d/fdinfo/%s" % (pid, fd)).read()
        except OSError:
            continue
        ids = [l.split()[1] for l in info.splitlines() if l.startswith("prog_id:")]
        if ids:
            prog = json.loads(subprocess.run(["bpftool", "prog", "show", "id", ids[0], "-j"],
                                             capture_output=True, text=True).stdout or "{}")
            ns += prog.get("run_time_ns", 0)
    return ns


def cost_per_iteration(tool, py, secs):
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    w = Workload(py, "healthy")
    try:
        time.sleep(0.5)
        p = subprocess.Popen([tool, "-p", str(w.proc.pid), "-j"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        buf = ""
        while "Hit Ctrl-C" not in buf:
            line = p.stderr.readline()
            if not line:
                raise SystemExit("pyloop did not start: " + buf)
            buf += line
        time.sleep(secs)
        ns = prog_stats(p.pid)
        p.terminate()
        out, _ = p.communicate()
        polls = [json.loads(l) for l in out.splitlines() if '"pyloop_summary"' in l][0]["polls"]
        print("   %d iterations of the healthy loop, %.2f us of BPF per iteration (all programs, bpf_stats)"
              % (polls, ns / polls / 1000 if polls else 0), flush=True)
    finally:
        w.stop()
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)


def main():
    tool, py, rounds, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    print("   workload: %s" % py)
    throughput(tool, py, rounds, secs)
    cost_per_iteration(tool, py, secs)


if __name__ == "__main__":
    main()
