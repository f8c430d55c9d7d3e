"""pystack --async on a service with many live asyncio tasks.

Usage: pystack_async_bench.py PYSTACK PYTHON ROUNDS SECONDS TASKS

The service: TASKS tasks, each a chain of three coroutines awaiting asyncio.sleep (a
request waiting on its database), and one task counting work units (a little CPU, then
a yield to the loop), which reports (time, units, its CPU time) every 0.2 s. Each round
measures a window without pystack, then starts "pystack --async -F 99 -f -p PID" and,
once it is ready, a window with it, then stops it. Printed per round and as medians:
task reads per second (task stacks pystack sampled / TASKS / its run time), pystack's
CPU per task sampled (from /proc), and the service's units per wall second and per CPU
second with pystack over without (1.0 = no cost). The machine has 2 CPUs: pystack's CPU
is taken from whatever else runs, so the wall ratio is the one a service feels.
"""
import os
import statistics
import subprocess
import sys
import threading
import time

SERVICE = r'''
import asyncio, random, sys, time
TASKS = int(sys.argv[1])
units = 0
async def query(n):
    await asyncio.sleep(random.uniform(0.05, 0.5))
async def handler(n):
    while True:
        await query(n)
async def request(n):
    await handler(n)
async def counter():
    global units
    while True:
        x = 0
        for _ in range(200):
            x += 1
        units += 1
        await asyncio.sleep(0)
async def report():
    while True:
        await asyncio.sleep(0.2)
        print(time.monotonic(), units, time.process_time(), flush=True)
async def main():
    ts = [asyncio.create_task(request(i), name="req-%d" % i) for i in range(TASKS)]
    ts.append(asyncio.create_task(counter(), name="counter"))
    print("ready", flush=True)
    await report()
asyncio.run(main())
'''


class Service:
    def __init__(self, py, tasks):
        self.p = subprocess.Popen([py, "-c", SERVICE, str(tasks)], stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"
        self.last = None
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            t, n, cpu = line.split()
            with self.lock:
                self.last = (float(t), int(n), float(cpu))

    def now(self):
        while True:
            with self.lock:
                if self.last:
                    return self.last
            time.sleep(0.05)

    def window(self, seconds):
        """(units per wall second, units per CPU second) over the next seconds."""
        a = self.now()
        time.sleep(seconds)
        b = self.now()
        return (b[1] - a[1]) / (b[0] - a[0]), (b[1] - a[1]) / max(b[2] - a[2], 1e-9)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    pystack, py, rounds, seconds, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    svc = Service(py, tasks)
    rows = []
    try:
        time.sleep(1)
        for r in range(rounds):
            plain = svc.window(seconds)
            tool = subprocess.Popen([pystack, "--async", "-F", "99", "-f", "-p", str(svc.p.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            buf = ""
            while "Hit Ctrl-C" not in buf:
                line = tool.stderr.readline()
                if not line:
                    raise SystemExit("pystack did not start: " + buf)
                buf += line
            t0, c0 = time.monotonic(), cpu_seconds(tool.pid)
            sampled = svc.window(seconds)
            t1, c1 = time.monotonic(), cpu_seconds(tool.pid)
            tool.send_signal(2)
            err = tool.communicate(timeout=60)[1]
            summary = [l for l in err.splitlines() if "task_samples=" in l][-1]
            samples = int(summary.split("task_samples=")[1].split()[0])
            torn = int(summary.split("torn_reads=")[1].split()[0])
            ran = time.monotonic() - t0  # the task samples cover the whole run, about this
            reads = samples / tasks / ran
            us = (c1 - c0) * 1e6 / max(samples * (t1 - t0) / ran, 1)
            rows.append((reads, us, sampled[0] / plain[0], sampled[1] / plain[1]))
            print("   round %d: %.1f reads/s of %d tasks, %.1f us of pystack CPU per task sampled, "
                  "throughput x%.3f per wall s, x%.3f per CPU s (%d torn reads)"
                  % (r + 1, reads, tasks, us, rows[-1][2], rows[-1][3], torn), flush=True)
    finally:
        svc.p.kill()
        svc.p.wait()
    med = [statistics.median(c) for c in zip(*rows)]
    print("   pystack --async -F 99, %d tasks: %.1f reads/s, %.1f us per task sampled; "
          "service throughput x%.3f per wall second, x%.3f per CPU second (medians of %d)"
          % (tasks, med[0], med[1], med[2], med[3], rounds))


if __name__ == "__main__":
    main()
