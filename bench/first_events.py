"""pymonitor against the same trackers as separate tools: seconds from exec to the
first event of each tracker, and the summed RSS once every tracker has had its first
event (or after 60 s), rounds interleaved (one process, then the separate tools).

usage: first_events.py ROUNDS BUILD
The workload is one Python process that spins, collects garbage every 50 ms and makes a
loopback TCP connection every 20 ms (its threads sleep, so they wait for the spinner's
GIL and are off the CPU); hostnet samples every second. pyhandoff and
tcploss need a server or packet loss to have events: they run (and are counted in the
RSS) but have no first event here. The tools are the trackers of the list
(src/trackers/trackers.h) as trackers_in_one --list names them, each on -p PID when it
takes one (else every second: -i 1); their event metrics come from --fields.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

rounds, build = int(sys.argv[1]), sys.argv[2]
NOT_HERE = {"handoff", "tcp_loss"}  # no server, no packet loss: no event
TOOLS = subprocess.run([build + "/tests/trackers_in_one", "--list"], stdout=subprocess.PIPE,
                       check=True, text=True).stdout.split()


def event_metrics(tool):
    out = subprocess.run([build + "/" + tool, "--fields"], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    rows = [l.split("\t") for l in out.splitlines()[1:]]
    return list(dict.fromkeys(r[0] for r in rows if r[1] == "event"))


def takes_pid(tool):
    out = subprocess.run([build + "/" + tool, "--help"], stdout=subprocess.PIPE, text=True).stdout
    return "--pid" in out


METRICS = {m: t for t in TOOLS for m in event_metrics(t) if m not in NOT_HERE}
WORKLOAD = r'''
import gc, socket, sys, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(128)
port = srv.getsockname()[1]
def conns():
    while True:
        c = socket.create_connection(("127.0.0.1", port)); a, _ = srv.accept()
        c.close(); a.close(); time.sleep(0.02)
def collect():
    while True:
        gc.collect(0); time.sleep(0.05)
threading.Thread(target=conns, daemon=True).start()
threading.Thread(target=collect, daemon=True).start()
print("ready", flush=True)
while True:
    pass
'''


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    except OSError:
        return 0


def run(cmds):
    """{metric: seconds to its first event}, summed RSS (KiB) when all were seen."""
    t0 = time.monotonic()
    outs = []
    procs = []
    for c in cmds:
        out = tempfile.TemporaryFile()
        outs.append(out)
        procs.append(subprocess.Popen(c, stdout=out, stderr=subprocess.DEVNULL))
    first = {}
    deadline = t0 + 60
    while time.monotonic() < deadline and len(first) < len(METRICS):
        time.sleep(0.1)
        for out in outs:
            out.seek(0)
            for line in out.read().decode(errors="replace").splitlines():
                try:
                    m = json.loads(line).get("metric")
                except ValueError:
                    continue
                if m in METRICS and m not in first:
                    first[m] = time.monotonic() - t0
    rss = sum(rss_kb(p.pid) for p in procs)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()
    return first, rss


w = subprocess.Popen(["/usr/bin/python3", "-c", WORKLOAD], stdout=subprocess.PIPE)
try:
    assert w.stdout.readline().strip() == b"ready"
    pid = str(w.pid)
    one = [[build + "/pymonitor", "-j", "-p", pid, "--hnh-interval", "1"]]
    separate = [[build + "/" + t, "-j"] + (["-p", pid] if takes_pid(t) else ["-i", "1"])
                for t in TOOLS]
    res = {"pymonitor": [], "separate": []}
    for _ in range(rounds):
        res["pymonitor"].append(run(one))
        res["separate"].append(run(separate))
finally:
    w.kill()
    w.wait()

print("   %-30s %12s %12s" % ("median over %d rounds" % rounds, "pymonitor", "%d tools" % len(TOOLS)))
for m in METRICS:
    a = [r[0].get(m) for r in res["pymonitor"]]
    b = [r[0].get(m) for r in res["separate"]]
    fmt = lambda v: "%12.2f" % statistics.median(v) if None not in v else "%12s" % "none"
    print("   %-30s %s %s" % ("first %s (s)" % m, fmt(a), fmt(b)))
ra = statistics.median(r[1] for r in res["pymonitor"]) / 1024
rb = statistics.median(r[1] for r in res["separate"]) / 1024
print("   %-30s %12.1f %12.1f   ratio pymonitor/tools: %.2f" % ("RSS, all running (MiB)", ra, rb, ra / rb))
