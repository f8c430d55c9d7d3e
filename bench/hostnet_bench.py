"""Makes PAIRS loopback connections (2*PAIRS ESTABLISHED sockets) and TW connections
closed client-first (TW sockets in TIME_WAIT), then times, interleaved for ROUNDS
rounds: one hostnet snapshot (-c 1, the process from exec to exit, and its own
snapshot_ms), `ss -s` (summary counters only) and `ss -tan` (dumps every socket,
as hostnet does). Prints medians and ratios.

usage: hostnet_bench.py HOSTNET PAIRS TW ROUNDS   (run inside a fresh network namespace)
"""
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

hostnet, pairs, tw, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# a process may hold 20000 fds here (the hard limit cannot be raised): workers of
# up to 9000 pairs each hold the ESTABLISHED sockets
PER_WORKER = 9000


def worker(index, n, ready_w, hold_r):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 7000 + index))
    srv.listen(4096)
    held = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", 7000 + index))
        a, _ = srv.accept()
        held += (c, a)
    os.write(ready_w, b"k")
    os.read(hold_r, 1)  # until the parent closes its end
    os._exit(0)


t0 = time.monotonic()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
ready_r, ready_w = os.pipe()
hold_r, hold_w = os.pipe()
children, left, index = [], pairs, 0
while left > 0:
    n = min(left, PER_WORKER)
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(hold_w)
        worker(index, n, ready_w, hold_r)
    children.append(pid)
    left -= n
    index += 1
os.close(ready_w)
os.close(hold_r)
for _ in children:
    assert os.read(ready_r, 1) == b"k", "a worker failed"
srv = socket.socket()
srv.bind(("127.0.0.1", 6999))
srv.listen(4096)
for _ in range(tw):
    c = socket.create_connection(("127.0.0.1", 6999))
    a, _ = srv.accept()
    c.close()
    a.recv(1)
    a.close()
made = time.monotonic() - t0


def timed(cmd):
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
    return time.monotonic() - t, p.stdout


runs = {"hostnet": [], "hostnet_snapshot": [], "ss -s": [], "ss -tan": []}
sockets = None
for _ in range(rounds):
    # -i 0.001: the baseline read, 1 ms, then the snapshot
    wall, out = timed([hostnet, "-j", "-c", "1", "-i", "0.001", "--interface", "lo"])
    snap = json.loads(out.splitlines()[0])
    sockets = snap["tcp_sockets"]
    runs["hostnet"].append(wall)
    runs["hostnet_snapshot"].append(snap["snapshot_ms"] / 1000)
    runs["ss -s"].append(timed(["ss", "-s"])[0])
    runs["ss -tan"].append(timed(["ss", "-tan"])[0])

med = {k: statistics.median(v) for k, v in runs.items()}
print("   %d TCP sockets (%d ESTABLISHED, %d TIME_WAIT; hostnet counted %d), made in %.1f s"
      % (2 * pairs + tw + len(children) + 1, 2 * pairs, tw, sockets, made))
print("   median of %d interleaved rounds:" % rounds)
for k in runs:
    print("     %-18s %8.1f ms" % (k, med[k] * 1000))
print("   ratio hostnet (whole process) / ss -s   : %.2f" % (med["hostnet"] / med["ss -s"]))
print("   ratio hostnet (whole process) / ss -tan : %.2f" % (med["hostnet"] / med["ss -tan"]))
print("   ratio hostnet snapshot_ms    / ss -tan : %.2f" % (med["hostnet_snapshot"] / med["ss -tan"]))
os.close(hold_w)
for pid in children:
    os.waitpid(pid, 0)
