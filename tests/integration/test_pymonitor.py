"""pymonitor: the trackers in one process, into a database. Ground truth: the events
the same run printed with --also-stdout (rows per table equal them, one for one), GC
pauses against gc.callbacks (test_pygc's check), the connector's own list of client
ports, and gunicorn's access log for the handoffs."""
import os
import sqlite3
import subprocess
import time

from conftest import Tool, run, tool_path
from test_pygc import Workload, check_against_callbacks
from test_pyhandoff import children_of, gunicorn, handoffs, log_lines, servers, wrk  # noqa: F401 (fixture)
from test_tcphandshake import finish_connector, start_connector

PYTHON = "/usr/bin/python3.11"
TABLES = {"gc_pause": "ebpf_gc_pause", "tcp_connect": "ebpf_tcp_connect", "handoff": "ebpf_handoff"}
# stack samples are stored aggregated (one row per window, thread and stack) and the stacks once
PROFILE_TABLES = {"ebpf_py_stack_profile", "ebpf_stacks"}


def test_rows_per_table_are_the_events_printed(servers, tmp_path):  # noqa: F811
    srv, log = gunicorn(servers, tmp_path, threads=4)
    worker = children_of(srv.pid)[0]
    w = Workload([PYTHON])
    conn, hello = start_connector(50, "4")
    db = str(tmp_path / "monitor.db")
    try:
        # the original's spelling: several words after one -p and one --enable
        pids = [str(worker), str(w.pid), str(hello["pid"])]
        mon = Tool("pymonitor", ["-p"] + pids + ["-e", "mon", "--enable", "gc", "py_stack", "tcp_connect",
                                 "handoff", "--sqlite", db, "--also-stdout"],
                   json_mode=False)
        mon.json_mode = True  # --also-stdout: JSON lines
        mon.wait_ready()
        recs, stats = w.go()
        result = finish_connector(conn)
        wrk(srv.port, 3, conns=4)
        time.sleep(1.5)
        mon.stop()
        assert mon.returncode == 0, mon.stderr
    finally:
        w.finish()
        if mon.proc.poll() is None:
            mon.proc.kill()
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    names = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    # tcp_accept was not enabled: tcphandshake runs, its accepts are left out
    # (and pystack's --async records, which pymonitor does not turn on: an empty table)
    assert names - {"ebpf_py_task"} == set(TABLES.values()) | PROFILE_TABLES, names
    assert not mon.events("tcp_accept")
    for metric, table in TABLES.items():
        events = mon.events(metric)
        rows = [dict(r) for r in con.execute("SELECT * FROM %s ORDER BY rowid" % table)]
        assert len(rows) == len(events) > 0, (metric, len(rows), len(events))
        assert all(r["env"] == "mon" for r in rows)
        assert [r["time"] for r in rows] == [e["time"] for e in events]
        assert [r["pid"] for r in rows] == [e["pid"] for e in events]
    # GC: the pauses are the target's own collections, as pygc's are
    gc_events = mon.events("gc_pause")
    check_against_callbacks([e for e in gc_events if e["pid"] == w.pid], recs, stats)
    gc_rows = [dict(r) for r in con.execute("SELECT * FROM ebpf_gc_pause WHERE pid = ?", (w.pid,))]
    assert sorted((r["start_ns"], r["end_ns"], r["generation"]) for r in gc_rows) == \
        sorted((e["start_ns"], e["end_ns"], e["generation"]) for e in gc_events if e["pid"] == w.pid)
    # connects: every one the connector made, once
    ports = sorted(r["src_port"] for r in con.execute(
        "SELECT src_port FROM ebpf_tcp_connect WHERE pid = ? AND dst_port = ?", (hello["pid"], result["port"])))
    assert ports == sorted(result["client_ports"])
    # handoffs: one per request of the access log (plus at most one EOF per connection)
    got = handoffs(mon.events("handoff"), {worker})
    logged = len(log_lines(log))
    assert logged > 100 and logged <= len(got) <= logged + 4 + 8, (len(got), logged)
    # py_stack samples: per (pid, tid, thread, stack) the aggregated rows count exactly the
    # samples printed, and every stack_id resolves in the dictionary
    samples = mon.events("py_stack")
    assert samples
    printed = {}
    for e in samples:
        key = (e["pid"], e["tid"], e["thread_name"], e["stack"])
        printed[key] = printed.get(key, 0) + 1
    stored = {(pid, tid, thread, stack): n for pid, tid, thread, stack, n in con.execute(
        "SELECT pid, tid, thread_name, s.stack, sum(samples) FROM ebpf_py_stack_profile p"
        " JOIN (SELECT DISTINCT stack_id, stack FROM ebpf_stacks) s USING (stack_id)"
        " GROUP BY pid, tid, thread_name, s.stack")}
    assert stored == printed
    assert con.execute("SELECT count(*) FROM ebpf_py_stack_profile WHERE stack_id NOT IN"
                       " (SELECT stack_id FROM ebpf_stacks)").fetchone()[0] == 0
    assert {pid for pid, _, _, _ in stored} <= {worker, w.pid, hello["pid"]}


def test_one_tracker_that_cannot_attach_is_a_warning(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        mon = Tool("pymonitor", ["-p", str(sleeper.pid), "-e", "t", "--enable", "gc,tcp_connect",
                                 "--sqlite", str(tmp_path / "x.db")], json_mode=False)
        mon.wait_ready()
        mon.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert mon.returncode == 0, mon.stderr
    assert "pygc could not inspect its targets: running without it" in mon.stderr
    assert "Tracing TCP handshakes." in mon.stderr


def test_usage_errors():
    pm = tool_path("pymonitor")
    r = run([pm, "--all", "--sqlite", "/nonexistent/x.db"], check=False)
    assert r.returncode == 2 and "-e ENV is required with a database" in r.stderr
    r = run([pm, "-e", "x"], check=False)
    assert r.returncode == 2 and "-p PID or --all is required" in r.stderr
    r = run([pm, "--all", "-e", "x", "--enable", "nosuch"], check=False)
    assert r.returncode == 2 and "no tracker 'nosuch'" in r.stderr
    r = run([pm, "--all", "-e", "x", "--enable", "gil,offcpu"], check=False)
    assert r.returncode == 2 and "no tracker to run" in r.stderr
    assert "gil traces -p pids only: left out with --all" in r.stderr


SHARED_WORKLOAD = r'''
import gc, threading, time
def sleeper():
    while True:
        time.sleep(0.03)
def collector():
    while True:
        gc.collect(); time.sleep(0.05)
threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=collector, daemon=True).start()
print("ready", flush=True)
while True:
    pass
'''


def test_trackers_share_one_inspection_of_a_target(tmp_path):
    """Four Python trackers follow one target: until they are ready its /proc/PID/maps
    is read once, and its memory is opened once in the whole run (strace), and each
    tracker has its events. (After the start pyoffcpu's native symbolizer, libbcc's,
    reads the maps for the native frames' modules.)"""
    w = subprocess.Popen([PYTHON, "-c", SHARED_WORKLOAD], stdout=subprocess.PIPE)
    trace = str(tmp_path / "strace.out")
    try:
        assert w.stdout.readline().strip() == b"ready"
        mon = Tool("pymonitor", ["-p", str(w.pid), "--enable", "gc,gil,offcpu,py_stack", "-d", "3"],
                   prefix=["strace", "-f", "-qq", "-s", "200", "-e", "trace=openat,write", "-o", trace])
        mon.wait_ready()
        mon.proc.wait(timeout=120)
        mon.stop()
    finally:
        w.kill()
        w.wait()
    assert mon.returncode == 0, mon.stderr
    for metric in ("gc_pause", "gil_wait", "off_cpu", "py_stack"):
        assert [e for e in mon.events(metric) if e["pid"] == w.pid], metric
    opens = open(trace).read()
    start = opens[:opens.index("Hit Ctrl-C to end.")]
    maps, mem = '"/proc/%d/maps"' % w.pid, '"/proc/%d/mem"' % w.pid
    assert (start.count(maps), opens.count(mem)) == (1, 1), (start.count(maps), opens.count(mem))
