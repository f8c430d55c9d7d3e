"""Start-up cost of a tracer: seconds from exec to its first event on stdout, and its
RSS at that moment, for two commands interleaved round by round (A B A B ...).

usage: startup.py ROUNDS NAME_A CMD_A NAME_B CMD_B   (CMD as one shell-quoted string)
A background loop makes a loopback TCP connection every 20 ms, so both see events.
"""
import os
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time

rounds = int(sys.argv[1])
cmds = [(sys.argv[2], shlex.split(sys.argv[3])), (sys.argv[4], shlex.split(sys.argv[5]))]
stop = threading.Event()


def traffic():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    port = srv.getsockname()[1]
    while not stop.is_set():
        c = socket.create_connection(("127.0.0.1", port))
        a, _ = srv.accept()
        c.close()
        a.close()
        time.sleep(0.02)


def rss_kb(pid):
    """Resident set of the process and its children (BCC's front end is a python3)."""
    total = 0
    for p in [pid] + [int(c) for c in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]:
        for line in open("/proc/%d/status" % p):
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def one(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = 0
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("%s exited before its first event" % cmd)
        lines += 1
        # skip a header line: the first line with a digit-only field is an event
        if any(f.isdigit() for f in line.split()):
            break
    first = time.monotonic() - t0
    rss = rss_kb(p.pid)
    p.terminate()
    p.wait()
    return first, rss


threading.Thread(target=traffic, daemon=True).start()
results = {name: [] for name, _ in cmds}
for _ in range(rounds):
    for name, cmd in cmds:
        results[name].append(one(cmd))
stop.set()
(na, _), (nb, _) = cmds
print("%-28s %12s %12s" % ("median over %d rounds" % rounds, na, nb))
for i, what in ((0, "start to first event (s)"), (1, "RSS at first event (MiB)")):
    a = statistics.median(r[i] for r in results[na])
    b = statistics.median(r[i] for r in results[nb])
    scale = 1 if i == 0 else 1 / 1024
    ratios = [ra[i] / rb[i] for ra, rb in zip(results[na], results[nb])]
    print("%-28s %12.2f %12.2f   ratio %s/%s: %.2f (pairwise median)" % (
        what, a * scale, b * scale, na, nb, statistics.median(ratios)))
