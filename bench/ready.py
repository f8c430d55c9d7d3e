"""Start-up and memory of tools, two variants side by side: seconds from exec until every
command of a variant has said "Hit Ctrl-C to end." (compiled and attached), and the
summed RSS of its processes at that moment; rounds interleaved (A B A B ...).

usage: ready.py ROUNDS NAME_A CMDS_A NAME_B CMDS_B
CMDS: shell-quoted commands separated by " ;; ", started together (a variant of two
processes is the same work as one process running two trackers).
"""
import os
import shlex
import statistics
import subprocess
import sys
import time

rounds = int(sys.argv[1])
variants = [(sys.argv[2], [shlex.split(c) for c in sys.argv[3].split(" ;; ")]),
            (sys.argv[4], [shlex.split(c) for c in sys.argv[5].split(" ;; ")])]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def wait_banner(p, deadline):
    buf = b""
    os.set_blocking(p.stderr.fileno(), False)
    while time.monotonic() < deadline:
        chunk = p.stderr.read()
        if chunk:
            buf += chunk
            if b"Hit Ctrl-C to end." in buf:
                return
        if p.poll() is not None:
            break
        time.sleep(0.01)
    raise SystemExit("%s did not become ready: %s" % (p.args, buf.decode(errors="replace")[-500:]))


def one(cmds):
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
    try:
        for p in procs:
            wait_banner(p, t0 + 120)
        ready = time.monotonic() - t0
        rss = sum(rss_kb(p.pid) for p in procs)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
    return ready, rss


results = {name: [] for name, _ in variants}
for _ in range(rounds):
    for name, cmds in variants:
        results[name].append(one(cmds))
(na, _), (nb, _) = variants
print("   %-26s %14s %14s" % ("median over %d rounds" % rounds, na, nb))
for i, what, scale in ((0, "start to ready (s)", 1), (1, "RSS when ready (MiB)", 1 / 1024)):
    a = statistics.median(r[i] for r in results[na])
    b = statistics.median(r[i] for r in results[nb])
    ratios = [ra[i] / rb[i] for ra, rb in zip(results[na], results[nb])]
    print("   %-26s %14.2f %14.2f   ratio %s/%s: %.2f (pairwise median)" % (
        what, a * scale, b * scale, na, nb, statistics.median(ratios)))
