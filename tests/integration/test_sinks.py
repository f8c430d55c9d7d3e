"""The database sinks every tool shares (--sqlite, --clickhouse-url): real SQLite files
read back with Python's sqlite3 module, a real clickhouse-server started here on its
own port and temp dir (clickhouse_server.py).

Ground truths: the events the same run printed with --also-stdout (every one is a row,
every row one of them), gc.callbacks for the GC pauses (test_pygc's check), the
server's own row counts, and the count of events the run emitted against what landed
plus what was dropped.
"""
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from clickhouse_server import TESTER_PASSWORD, AnswerLost, ClickHouse
from conftest import TARGETS, run, tool_path
from test_pygc import Workload, check_against_callbacks, pinning, start_pygc

PYTHON = "/usr/bin/python3.11"  # Debian's, installed by make deps


@pytest.fixture
def clickhouse(tmp_path):
    server = ClickHouse(tmp_path / "clickhouse")
    yield server
    server.close()


def pygc_on_workload(run_tool, *sink_args):
    """pygc -j --also-stdout with sink_args on gc_workload.py: (tool, recs, stats)."""
    t_pin, p_pin = pinning()
    w = Workload([PYTHON], prefix=t_pin)
    try:
        tool = start_pygc(run_tool, p_pin, "-p", str(w.pid), "-e", "sinktest", "--also-stdout",
                          *sink_args)
        recs, stats = w.go()
        time.sleep(0.3)
        tool.stop()
        assert tool.returncode == 0, tool.stderr
        return tool, recs, stats
    finally:
        w.finish()


def by_start(rows):
    return sorted(rows, key=lambda r: r["start_ns"])


def test_sqlite_rows_are_the_events_and_match_gc_callbacks(run_tool, tmp_path):
    db = str(tmp_path / "events.db")
    tool, recs, stats = pygc_on_workload(run_tool, "--sqlite", db)
    events = tool.events("gc_pause")
    check_against_callbacks(events, recs, stats)

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    rows = [dict(r) for r in con.execute("SELECT * FROM ebpf_gc_pause")]
    # every event is a row and every row an event: same keys, same values
    assert len(rows) == len(events)
    for r, e in zip(by_start(rows), by_start(events)):
        assert (r["pid"], r["tid"], r["generation"], r["start_ns"], r["end_ns"], r["collected"]) == \
            (e["pid"], e["tid"], e["generation"], e["start_ns"], e["end_ns"], e["collected"])
        assert r["duration_ms"] == pytest.approx(e["duration_ms"], abs=1e-9)
        assert r["env"] == "sinktest" and r["host"] == os.uname().nodename
        assert r["time"] == e["time"] and r["start_time"] == e["start_time"]
        # the microseconds column is the ISO time's own value
        assert r["time_us"] % 1000000 == int(e["time"][20:26])
    # only event records are tables; the summaries stay on stderr/stdout
    names = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == {"ebpf_gc_pause"}


def test_sqlite_can_be_read_while_written(run_tool, tmp_path):
    db = str(tmp_path / "live.db")
    storm = subprocess.Popen([PYTHON, os.path.join(TARGETS, "gc_storm.py"), "100"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert storm.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(storm.pid), "--sqlite", db, json_mode=False)
        counts = []
        con = sqlite3.connect(db, timeout=10)
        for _ in range(6):
            time.sleep(0.5)
            counts.append(con.execute("SELECT count(*) FROM ebpf_gc_pause").fetchone()[0])
        con.close()
        tool.stop()
        assert tool.returncode == 0, tool.stderr
        # stdout stays empty with a database unless --also-stdout
        assert tool.stdout == ""
    finally:
        storm.stdin.close()
        storm.wait()
    assert counts == sorted(counts) and counts[-1] > counts[0] > 0, counts
    final = sqlite3.connect(db).execute("SELECT count(*) FROM ebpf_gc_pause").fetchone()[0]
    assert final >= counts[-1]
    assert "ebpf_gc_pause: %d rows" % final in tool.stderr


def test_sqlite_read_only_path_is_a_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "x.db"
    sqlite3.connect(str(db)).close()
    os.chmod(db, 0o444)
    os.chmod(ro, 0o555)
    # root ignores file modes: a read-only mount is what stops root
    subprocess.run(["mount", "--bind", str(ro), str(ro)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
    try:
        r = run([tool_path("hostnet"), "-c", "1", "-i", "0.1", "--sqlite", str(db)], check=False)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert r.returncode == 1, r.stderr
    assert "SQLite database %s" % db in r.stderr and "Read-only file system" in r.stderr, r.stderr
    assert r.stdout == ""


def test_clickhouse_rows_are_the_events_and_match_gc_callbacks(run_tool, clickhouse):
    tool, recs, stats = pygc_on_workload(run_tool, "--clickhouse-url", clickhouse.url,
                                         "--ch-flush-interval", "0.5")
    events = tool.events("gc_pause")
    check_against_callbacks(events, recs, stats)
    rows = clickhouse.rows("SELECT pid, generation, start_ns, end_ns, duration_ms, env, host, "
                           "time_us, toUnixTimestamp(time) FROM ebpf_gc_pause ORDER BY start_ns")
    assert len(rows) == len(events)
    for r, e in zip(rows, by_start(events)):
        assert [int(r[0]), int(r[1]), int(r[2]), int(r[3])] == \
            [e["pid"], e["generation"], e["start_ns"], e["end_ns"]]
        assert float(r[4]) == pytest.approx(e["duration_ms"], abs=1e-9)
        assert r[5] == "sinktest" and r[6] == os.uname().nodename
        assert int(r[7]) // 1000000 == int(r[8])  # the DateTime is the microseconds' second
    assert "ebpf_gc_pause: landed=%d dropped=0" % len(events) in tool.stderr
    assert clickhouse.count("ebpf_dropped") == 0


def pygc_through_outage(run_tool, url, outage, *args):
    """pygc --also-stdout on a GC storm into ClickHouse at url (batches of 50 rows, sent
    every 0.2 s at most); outage() runs once it started (it takes the server away and
    starts it again). Returns the tool, stopped once the storm ended."""
    storm = subprocess.Popen([PYTHON, os.path.join(TARGETS, "gc_storm.py"), "200"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert storm.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(storm.pid), "--also-stdout", "--clickhouse-url", url,
                        "--ch-flush-interval", "0.2", "--ch-batch-size", "50", *args)
        outage()
        time.sleep(2)
        storm.stdin.close()
        storm.wait()
        time.sleep(0.5)
        tool.stop()
        assert tool.returncode == 0, tool.stderr
    finally:
        if storm.poll() is None:
            storm.kill()
            storm.wait()
    return tool


def outage_run(run_tool, clickhouse, queue_max, outage_s):
    """pygc on a GC storm into ClickHouse, the server killed for outage_s mid-run.
    Returns (emitted, landed, dropped printed, dropped rows written)."""
    def outage():
        time.sleep(1)
        clickhouse.kill()
        time.sleep(outage_s)
        clickhouse.start()

    tool = pygc_through_outage(run_tool, clickhouse.url, outage, "--ch-queue-max", str(queue_max))
    emitted = len(tool.events("gc_pause"))
    landed = clickhouse.count("ebpf_gc_pause")
    line = [l for l in tool.stderr.splitlines() if "clickhouse: ebpf_gc_pause:" in l]
    assert len(line) == 1, tool.stderr
    fields = dict(kv.split("=") for kv in line[0].split()[-2:])
    assert int(fields["landed"]) == landed
    written = sum(int(d) for [d] in clickhouse.rows(
        "SELECT dropped FROM ebpf_dropped WHERE table = 'ebpf_gc_pause'"))
    return emitted, landed, int(fields["dropped"]), written, tool


def test_clickhouse_killed_for_10_s_every_event_lands_or_is_counted(run_tool, clickhouse):
    emitted, landed, dropped, written, tool = outage_run(run_tool, clickhouse, 100000, 10)
    assert "is away" in tool.stderr and "is back" in tool.stderr, tool.stderr
    assert emitted > 1000
    # a queue of 100000 rows holds the 10 s: nothing dropped, all landed after the restart
    assert (emitted, dropped) == (landed, 0), tool.stderr[-3000:]


def test_clickhouse_killed_after_commit_before_answer_no_row_twice(run_tool, clickhouse):
    """The server SIGKILLed between committing an insert and its answer reaching the
    sink (AnswerLost: the third insert into ebpf_gc_pause), started again 2 s later:
    the sink retries that batch only after asking which of its batch ids landed. Every
    emitted event is a row exactly once, and the sink's landed count is the server's."""
    proxy = AnswerLost(clickhouse, "ebpf_gc_pause", nth=3)

    def outage():
        assert proxy.fired.wait(30), "no third insert into ebpf_gc_pause in 30 s"
        time.sleep(2)
        clickhouse.start()

    try:
        tool = pygc_through_outage(run_tool, proxy.url, outage)
    finally:
        proxy.close()
    events = tool.events("gc_pause")
    assert "is away" in tool.stderr and "is back" in tool.stderr, tool.stderr
    rows = clickhouse.rows("SELECT pid, start_ns, count() FROM ebpf_gc_pause GROUP BY pid, start_ns")
    doubled = [r for r in rows if int(r[2]) != 1]
    assert not doubled, "%d events stored more than once, e.g. %s" % (len(doubled), doubled[:3])
    assert sorted((int(r[0]), int(r[1])) for r in rows) == sorted((e["pid"], e["start_ns"]) for e in events)
    assert "ebpf_gc_pause: landed=%d dropped=0" % len(events) in tool.stderr, tool.stderr[-2000:]
    # the lost answer's batch (the third, of 50 rows: the storm fills batches) is among them
    assert len(events) > 150


def test_clickhouse_small_queue_under_a_storm_counts_drops_exactly(run_tool, clickhouse):
    emitted, landed, dropped, written, tool = outage_run(run_tool, clickhouse, 100, 5)
    assert dropped > 0 and landed > 0
    assert emitted == landed + dropped, (emitted, landed, dropped)
    # the drop counts became rows of their own once the server was back
    assert written == dropped


def test_clickhouse_start_up_errors_are_clear(clickhouse, tmp_path):
    hostnet = [tool_path("hostnet"), "-c", "1", "-i", "0.1"]

    def fails(args, code, text, env=None):
        r = run(hostnet + args, check=False, env=env)
        assert r.returncode == code and text in r.stderr, (args, r.returncode, r.stderr)
        assert r.stdout == ""

    fails(["--clickhouse-url", "127.0.0.1:1"], 2, "expected http://HOST:PORT")
    port = clickhouse.http_port + 1 if clickhouse.http_port < 65535 else 1
    fails(["--clickhouse-url", "http://127.0.0.1:%d" % port], 1, "cannot reach ClickHouse")
    fails(["--clickhouse-url", clickhouse.url, "--clickhouse-user", "tester", "--clickhouse-password",
           "wrong"], 1, "refused user 'tester'")
    fails(["--clickhouse-url", clickhouse.url, "--clickhouse-database", "nosuchdb"], 1,
          "nosuchdb")
    # the right password from each source
    pwfile = tmp_path / "pw"
    pwfile.write_text(TESTER_PASSWORD + "\n")
    for args, env in ((["--clickhouse-password-file", str(pwfile)], None),
                      ([], dict(os.environ, CLICKHOUSE_PASSWORD=TESTER_PASSWORD))):
        r = run(hostnet + ["--clickhouse-url", clickhouse.url, "--clickhouse-user", "tester"] + args,
                check=False, env=env)
        assert r.returncode == 0, r.stderr
    assert clickhouse.count("ebpf_host_net_health") == 2


def test_clickhouse_password_is_not_in_ps(run_tool, clickhouse):
    tool = run_tool("hostnet", "-i", "0.5", "--clickhouse-url", clickhouse.url, "--clickhouse-user",
                    "tester", "--clickhouse-password", TESTER_PASSWORD, json_mode=False)
    time.sleep(1.5)  # a snapshot or two
    with open("/proc/%d/cmdline" % tool.proc.pid, "rb") as f:
        cmdline = f.read()
    ps = subprocess.run(["ps", "-o", "args=", "-p", str(tool.proc.pid)], capture_output=True,
                        text=True).stdout
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    assert b"--clickhouse-password" in cmdline and TESTER_PASSWORD.encode() not in cmdline
    assert "--clickhouse-password" in ps and TESTER_PASSWORD not in ps
    assert clickhouse.count("ebpf_host_net_health") >= 1


def test_sighup_writes_the_rows_still_held(run_tool, clickhouse, tmp_path):
    """Rows waiting for their batch (a 30 s flush interval) land when SIGHUP ends the run."""
    db = str(tmp_path / "hup.db")
    storm = subprocess.Popen([PYTHON, os.path.join(TARGETS, "gc_storm.py"), "50"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert storm.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(storm.pid), "--also-stdout", "--sqlite", db,
                        "--clickhouse-url", clickhouse.url, "--ch-flush-interval", "30")
        time.sleep(2)
        assert clickhouse.count("ebpf_gc_pause") == 0  # still held: the batch is not due
        tool.stop(sig=signal.SIGHUP)
        assert tool.returncode == 0, tool.stderr
    finally:
        storm.stdin.close()
        storm.wait()
    emitted = len(tool.events("gc_pause"))
    assert emitted > 20
    assert clickhouse.count("ebpf_gc_pause") == emitted
    assert sqlite3.connect(db).execute("SELECT count(*) FROM ebpf_gc_pause").fetchone()[0] == emitted
