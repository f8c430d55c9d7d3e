"""BPF time of pystack's on_sample per sample in an asyncio task, two builds side by side
(not part of make bench: it needs a second build, e.g. one from before a change).

usage: python3 bench/task_read_cost.py OLD_PYSTACK NEW_PYSTACK [PYTHON] [ROUNDS]

A target runs tests/targets/py_tasks.py split (two tasks burning the CPU); each round
runs each build's "pystack -p PID -F 999 -f" for 6 s, in turns, with
kernel.bpf_stats_enabled=1, and reads its on_sample's run_time_ns / run_cnt from
bpftool prog show (the program the run loaded: its id is new). Needs root.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
old, new = sys.argv[1], sys.argv[2]
python = sys.argv[3] if len(sys.argv) > 3 else "/usr/bin/python3"
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3


def on_sample_progs():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=True).stdout
    return {p["id"]: p for p in json.loads(out) if p.get("name") == "on_sample"}


def per_sample_us(tool, pid):
    before = set(on_sample_progs())
    p = subprocess.Popen([tool, "-p", str(pid), "-F", "999", "-f"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(6)
    mine = [q for i, q in on_sample_progs().items() if i not in before and q.get("run_cnt")]
    p.send_signal(signal.SIGINT)
    p.wait()
    assert len(mine) == 1, mine
    return mine[0]["run_time_ns"] / mine[0]["run_cnt"] / 1000


subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
target = subprocess.Popen([python, os.path.join(here, "..", "tests", "targets", "py_tasks.py"), "split"],
                          stdout=subprocess.DEVNULL)
try:
    time.sleep(1)
    got = {"old": [], "new": []}
    for _ in range(rounds):
        for name, tool in (("old", old), ("new", new)):
            got[name].append(per_sample_us(tool, target.pid))
finally:
    target.kill()
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
for name in ("old", "new"):
    print("%s: on_sample %.2f us per sample (median of %s)" % (
        name, statistics.median(got[name]), ", ".join("%.2f" % v for v in got[name])))
