"""pymonitor (and the small tools) when some -p pids cannot be traced, exit mid-run, or
are gunicorn workers that the master replaces. Ground truth: the target's own
gc.callbacks (test_pygc's check), gunicorn's access log with the pid of the worker
that served each request, the exit time a target writes down itself, and the pids
the test started."""
import datetime
import os
import re
import sqlite3
import subprocess
import sys
import time

from conftest import Tool, run, tool_path
from test_pygc import Workload, check_against_callbacks
from test_pyhandoff import children_of, gunicorn, handoffs, servers, wrk  # noqa: F401 (fixture)

PYTHON = "/usr/bin/python3.11"


def summaries(stderr):
    """{metric: {key: value}} of the summary lines on stderr (key=value pairs)."""
    found = {}
    for line in stderr.splitlines():
        m = re.search(r'summary: metric="(\w+)" (.*)', line)
        if m:
            found[m.group(1)] = {k: v for k, v in re.findall(r'(\w+)=(\S+)', m.group(2))}
    return found


def lines_naming(stderr, pid):
    return [l for l in stderr.splitlines() if re.search(r"\bpid %d\b" % pid, l)]


def iso_s(t):
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def test_a_pid_that_is_not_python_costs_only_itself(tmp_path):
    """-p <sleep> <CPython>: gc, gil and py_stack all run for the CPython one; one warning."""
    sleeper = subprocess.Popen(["sleep", "300"])
    w = Workload([PYTHON])
    db = str(tmp_path / "m.db")
    mon = None
    try:
        mon = Tool("pymonitor", ["-p", str(sleeper.pid), str(w.pid), "-e", "t", "--enable", "gc", "py_stack",
                                 "gil", "--sqlite", db, "--raw-samples"], json_mode=False)
        mon.wait_ready()
        recs, stats = w.go()
        time.sleep(0.5)
        mon.stop()
    finally:
        w.finish()
        sleeper.kill()
        sleeper.wait()
        if mon and mon.proc.poll() is None:
            mon.proc.kill()
    assert mon.returncode == 0, mon.stderr
    said = lines_naming(mon.stderr, sleeper.pid)
    assert len(said) == 1 and "skipped" in said[0] and "no CPython" in said[0], said
    assert "running without it" not in mon.stderr, mon.stderr
    s = summaries(mon.stderr)
    for metric in ("pygc_summary", "pygil_summary", "pystack_summary"):
        assert s[metric]["skipped_targets"] == "1" and s[metric]["exited_targets"] == "0", s[metric]
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    gc_rows = [dict(r) for r in con.execute("SELECT * FROM ebpf_gc_pause ORDER BY start_ns")]
    assert {r["pid"] for r in gc_rows} == {w.pid}
    # one row per collection the target's gc.callbacks saw, in order, inside its bracket
    check_against_callbacks(gc_rows, recs, stats)
    stack_pids = [p for (p,) in con.execute("SELECT pid FROM ebpf_py_stacks")]
    assert len(stack_pids) >= 5 and set(stack_pids) == {w.pid}
    files = {f for (f,) in con.execute("SELECT leaf_file FROM ebpf_py_stacks")}
    assert any(f and f.endswith("gc_workload.py") for f in files), files


def test_gunicorn_workers_replaced_mid_run_are_followed(servers, tmp_path):  # noqa: F811
    """-p <master> --children under wrk, max_requests replacing the worker during the
    run: handoffs equal the access log's requests, py_stack samples come from the first
    worker and from its replacement (the log names each request's worker pid)."""
    srv, log = gunicorn(servers, tmp_path, threads=4,
                        extra=["--max-requests", "500", "--max-requests-jitter", "0",
                               "--access-logformat", "%(p)s %(s)s"],
                        HANDOFF_SPIN_MS="4")
    first = children_of(srv.pid)[0]
    mon = Tool("pymonitor", ["-p", str(srv.pid), "--children", "--enable", "handoff", "py_stack"])
    try:
        mon.wait_ready()
        wrk(srv.port, 9, conns=4)
        time.sleep(1.5)
        mon.stop()
    finally:
        if mon.proc.poll() is None:
            mon.proc.kill()
    assert mon.returncode == 0, mon.stderr
    served = {}
    with open(log) as f:
        for line in f:
            pid = int(line.split()[0].strip("<>"))  # gunicorn writes %(p)s as <pid>
            served[pid] = served.get(pid, 0) + 1
    logged = sum(served.values())
    assert first in served and len(served) >= 2, served
    events = mon.events()
    got = handoffs(events)
    # every request within 1%, and per worker too
    assert abs(len(got) - logged) <= 0.01 * logged, (len(got), logged)
    for pid, n in served.items():
        mine = [e for e in got if e["pid"] == pid]
        assert abs(len(mine) - n) <= max(4, 0.01 * n), (pid, len(mine), n)
    stack_pids = {e["pid"] for e in events if e["metric"] == "py_stack"}
    later = [p for p in served if p != first]
    assert first in stack_pids, (stack_pids, served)
    # a replacement that served for a second or more was sampled too
    lived = [p for p in later if served[p] >= 200]
    assert lived and set(lived) <= stack_pids, (stack_pids, served)
    assert stack_pids <= set(served) | {srv.pid}, (stack_pids, served)
    s = [e for e in events if e["metric"] == "pystack_summary"][0]
    assert s["exited_targets"] >= 1 and s["skipped_targets"] == 0, s


EXITS_SOON = r'''
import gc, sys, time
sys.stdin.readline()
end = time.time() + float(sys.argv[1])
while time.time() < end:
    x = [[] for i in range(2000)]
    gc.collect(0)
    sum(i * i for i in range(20000))
sys.stdout.write("%.6f %d\n" % (time.time(), time.monotonic_ns()))
sys.stdout.flush()
'''


def test_a_pid_that_exits_mid_run(tmp_path):
    """Two targets, one exits after 2 s: its rows stop there, the other's go on, and
    the summaries count one exit."""
    stays, goes = (subprocess.Popen([PYTHON, "-c", EXITS_SOON, t], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True) for t in ("300", "2"))
    mon = Tool("pymonitor", ["-p", str(stays.pid), str(goes.pid), "--enable", "gc", "py_stack"])
    try:
        mon.wait_ready()
        for p in (stays, goes):
            p.stdin.write("go\n")
            p.stdin.flush()
        wall, mono = goes.stdout.readline().split()
        goes.wait(timeout=30)
        time.sleep(3)
        mon.stop()
    finally:
        for p in (stays, goes):
            p.kill()
            p.wait()
        if mon.proc.poll() is None:
            mon.proc.kill()
    assert mon.returncode == 0, mon.stderr
    end_wall, end_mono = float(wall), int(mono)
    gcs = mon.events("gc_pause")
    stacks = mon.events("py_stack")
    gone_gc = [e for e in gcs if e["pid"] == goes.pid]
    assert gone_gc and max(e["end_ns"] for e in gone_gc) <= end_mono + 50_000_000
    gone_st = [e for e in stacks if e["pid"] == goes.pid]
    assert gone_st and max(iso_s(e["time"]) for e in gone_st) <= end_wall + 0.05
    # the other one goes on, well past the exit
    assert [e for e in gcs if e["pid"] == stays.pid and e["start_ns"] > end_mono + 2_000_000_000]
    assert [e for e in stacks if e["pid"] == stays.pid and iso_s(e["time"]) > end_wall + 2]
    assert "target pid %d exited" % goes.pid in mon.stderr
    for e in mon.events():
        if e["metric"] in ("pygc_summary", "pystack_summary"):
            assert e["exited_targets"] == 1 and e["skipped_targets"] == 0, e


def test_small_tool_skips_a_bad_pid():
    """pystack -p 1 -p <python> samples the Python one (pid 1 is no CPython, or not
    readable); with no pid left it exits 1."""
    py = subprocess.Popen([sys.executable, "-c", "while True: sum(i * i for i in range(10000))"])
    try:
        time.sleep(0.3)
        r = run([tool_path("pystack"), "-j", "-p", "1", "-p", str(py.pid), "2"], check=False, timeout=120)
    finally:
        py.kill()
        py.wait()
    assert r.returncode == 0, r.stderr
    said = lines_naming(r.stderr, 1)
    assert len(said) == 1 and said[0].endswith(": skipped"), r.stderr
    import json
    recs = [json.loads(l) for l in r.stdout.splitlines()]
    samples = [e for e in recs if e["metric"] == "py_stack"]
    assert len(samples) > 50 and {e["pid"] for e in samples} == {py.pid}
    summary = [e for e in recs if e["metric"] == "pystack_summary"][0]
    assert summary["skipped_targets"] == 1 and summary["processes"] == 1
    gone = subprocess.Popen(["true"])
    gone.wait()
    r = run([tool_path("pystack"), "-p", "1", "-p", str(gone.pid), "1"], check=False, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "no process with pid %d: skipped" % gone.pid in r.stderr
    assert "pystack: no -p pid is left to trace" in r.stderr
    assert r.stdout == ""


SPAWNS_LATER = r'''
import subprocess, sys
sys.stdin.readline()
# the child takes over stdin and stdout: "ready PID", "go", "done", "exit"
subprocess.run(sys.argv[1:])
'''


def test_pygc_children_started_later(run_tool, tmp_path):
    """pygc -p PARENT --children: a child CPython started after pygc has each of its
    collections (its gc.callbacks), the parent's are there too, nothing else is."""
    import shutil
    import tempfile
    from test_pygc import WORKLOAD
    d = tempfile.mkdtemp(prefix="pygc-children-")
    out = os.path.join(d, "records.txt")
    parent = subprocess.Popen([PYTHON, "-c", SPAWNS_LATER, PYTHON, WORKLOAD, out], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        tool = run_tool("pygc", "-p", str(parent.pid), "--children")
        parent.stdin.write("spawn\n")
        parent.stdin.flush()
        child = int(parent.stdout.readline().split()[1])
        time.sleep(1.5)  # found at the next scan for children (every second)
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "done"
        w = Workload.__new__(Workload)
        w.out = out
        recs, stats = w.records()
        parent.stdin.write("exit\n")
        parent.stdin.flush()
        parent.wait(timeout=30)
        tool.proc.wait(timeout=30)  # its only -p target exited: it ends by itself
        tool.stop()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        shutil.rmtree(d, ignore_errors=True)
    assert tool.returncode == 0, tool.stderr
    events = tool.events("gc_pause")
    assert {e["pid"] for e in events} <= {parent.pid, child}
    check_against_callbacks([e for e in events if e["pid"] == child], recs, stats)
    s = tool.summary()
    assert s["exited_targets"] == 2 and s["skipped_targets"] == 0, s


def test_tcp_trackers_follow_children_started_later():
    """pymonitor -p PARENT --children --enable tcp_connect tcp_accept tcp_loss: a child
    started after the start makes N connections to itself; each is one tcp_connect and
    one tcp_accept of the child (its own list of client ports), and its exit counts."""
    import json
    from conftest import TARGETS
    parent = subprocess.Popen([PYTHON, "-c", SPAWNS_LATER, sys.executable,
                               os.path.join(TARGETS, "tcp_connects.py"), "23", "4"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    mon = Tool("pymonitor", ["-p", str(parent.pid), "--children", "--enable", "tcp_connect", "tcp_accept",
                             "tcp_loss"])
    try:
        mon.wait_ready()
        parent.stdin.write("spawn\n")
        parent.stdin.flush()
        hello = json.loads(parent.stdout.readline())
        parent.stdin.write("go\n")
        parent.stdin.flush()
        result = json.loads(parent.stdout.readline())
        parent.stdin.close()
        parent.wait(timeout=30)
        time.sleep(1)
        mon.stop()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if mon.proc.poll() is None:
            mon.proc.kill()
    assert mon.returncode == 0, mon.stderr
    child = hello["pid"]
    for metric in ("tcp_connect", "tcp_accept"):
        events = mon.events(metric)
        assert {e["pid"] for e in events} == {child}, (metric, events[:3])
        assert sorted(e["src_port"] for e in events) == sorted(result["client_ports"]), metric
    for name in ("tcphandshake_summary", "tcploss_summary"):
        s = [e for e in mon.events() if e["metric"] == name][0]
        # the child and the parent
        assert s["exited_targets"] == 2 and s["children_exited"] == 1, s
        assert s["children_not_followed"] == 0 and s["skipped_targets"] == 0, s
