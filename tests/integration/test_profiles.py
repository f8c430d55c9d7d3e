"""Stored profiles (issue 29): stack samples as aggregated rows per window and stack,
the stacks once in ebpf_stacks, in SQLite and ClickHouse.

The side-by-side arrangement: one pymonitor run writes into both sinks at once with
--raw-samples, so both layouts (ebpf_py_stacks, a row per sample; and
ebpf_py_stack_profile + ebpf_stacks) hold the very same samples. Ground truths: the
raw rows (counted per function, they must equal the aggregated sums exactly), the
target's own thread_time per phase (the split), and --also-stdout's samples.
"""
import json
import os
import re
import socket
import sqlite3
import subprocess
import time

import pytest

import chdb_server
from clickhouse_server import ClickHouse
from conftest import ROOT, TARGETS, Tool, run, tool_path

PYTHON = "/usr/bin/python3.11"
TARGET = os.path.join(TARGETS, "py_profile.py")
FUNCS = ("a", "b", "c")


@pytest.fixture
def clickhouse(tmp_path):
    server = ClickHouse(tmp_path / "clickhouse")
    yield server
    server.close()


def funcs_of(stack):
    """The functions of a folded stack ("qualname (file:line);...")."""
    return [part.rsplit(" (", 1)[0] for part in stack.split(";")]


def per_function(stacks_and_counts):
    """{a: n, b: n, c: n}: samples with the function on the stack."""
    out = dict.fromkeys(FUNCS, 0)
    for stack, n in stacks_and_counts:
        for f in FUNCS:
            if f in funcs_of(stack):
                out[f] += n
    return out


class Target:
    """py_profile.py MODE, started, waiting for the word to go."""

    def __init__(self, mode):
        self.proc = subprocess.Popen([PYTHON, TARGET, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == b"ready"
        self.pid = self.proc.pid

    def go(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def finish(self):
        """Its own timing (split mode), after SIGTERM."""
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        lines = out.decode().strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def monitor(target, seconds, *sink_args):
    """pymonitor on target's py_stack for seconds of the target's work; its Tool."""
    mon = Tool("pymonitor", ["-p", str(target.pid), "-e", "fleet", "--enable", "py_stack"] + list(sink_args),
               json_mode=False)
    mon.wait_ready()
    target.go()
    time.sleep(seconds)
    return mon


def sqlite_layouts(db):
    con = sqlite3.connect(db)
    raw = list(con.execute("SELECT stack, count(*) FROM ebpf_py_stacks GROUP BY stack"))
    agg = list(con.execute(
        "SELECT s.stack, sum(p.samples) FROM ebpf_py_stack_profile p"
        " JOIN (SELECT DISTINCT stack_id, stack FROM ebpf_stacks) s USING (stack_id) GROUP BY s.stack"))
    unresolved = con.execute("SELECT count(*) FROM ebpf_py_stack_profile"
                             " WHERE stack_id NOT IN (SELECT stack_id FROM ebpf_stacks)").fetchone()[0]
    windows = con.execute("SELECT min(window_end_us - time_us), max(window_end_us - time_us),"
                          " sum(time_us % 5000000) FROM ebpf_py_stack_profile").fetchone()
    return raw, agg, unresolved, windows


def clickhouse_layouts(ch):
    raw = [(s, int(n)) for s, n in ch.rows("SELECT stack, count() FROM ebpf_py_stacks GROUP BY stack")]
    agg = [(s, int(n)) for s, n in ch.rows(
        "SELECT stack, sum(samples) FROM ebpf_py_stack_profile ANY LEFT JOIN"
        " (SELECT stack_id, any(stack) AS stack FROM ebpf_stacks GROUP BY stack_id) USING stack_id"
        " GROUP BY stack")]
    unresolved = ch.count("ebpf_py_stack_profile", "stack_id NOT IN (SELECT stack_id FROM ebpf_stacks)")
    return raw, agg, unresolved


def documented_queries():
    """The queries of pyebpf(7), STORED PROFILES, in the page's order: {name: sql}."""
    with open(os.path.join(ROOT, "man", "man7", "pyebpf.7")) as f:
        page = f.read()
    section = page[page.index('.SH "STORED PROFILES"'):page.index('.SH "ADDING A TRACKER"')]
    blocks = re.findall(r"^\.EX\n(.*?)^\.EE\n", section, re.M | re.S)
    text = [b.replace("\\(aq", "'").replace("\\-", "-") for b in blocks]
    queries = [q.strip() for b in text for q in b.split("\n\n")]
    names = ["top ch agg", "top ch raw", "top sqlite agg", "top sqlite raw",
             "folded ch agg", "folded ch raw", "folded sqlite agg", "folded sqlite raw"]
    assert len(queries) == len(names), queries
    return dict(zip(names, queries))


def check_documented_queries(db, ch, t1_us, t2_us):
    """Every query of pyebpf(7) gives the same answer on both layouts and in both sinks."""
    q = documented_queries()
    host = socket.gethostname()
    iso = [time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t / 1e6)) for t in (t1_us, t2_us)]

    def fill(sql):
        return sql.replace("'X'", "'fleet'").replace("'H'", "'%s'" % host).replace("'T1'", "'%s'" % iso[0]) \
            .replace("'T2'", "'%s'" % iso[1]).replace("T1_US", str(t1_us)).replace("T2_US", str(t2_us))

    con = sqlite3.connect(db)
    answers = {}
    for name, sql in q.items():
        if " ch " in name:
            # a NULL (an [unknown] leaf's file) is \N in TabSeparated, None from SQLite
            rows = [tuple("None" if v == "\\N" else v for v in r)
                    for r in ch.rows(fill(sql).replace("FORMAT TSVRaw", "FORMAT TabSeparated"))]
        else:
            rows = [tuple(str(v) for v in r) for r in con.execute(fill(sql))]
        answers[name] = sorted(rows)
    for kind in ("top", "folded"):
        got = {n: a for n, a in answers.items() if n.startswith(kind)}
        assert all(got.values()), got
        assert len({tuple(a) for a in got.values()}) == 1, got
    return answers


def test_split_50_30_20_aggregated_equals_raw_in_both_sinks(clickhouse, tmp_path):
    """One run into SQLite and ClickHouse with --raw-samples: per function the aggregated
    samples equal the raw rows exactly, in each sink and across them; the split is the
    target's own timing within 3 points; every stack_id resolves."""
    db = str(tmp_path / "profiles.db")
    target = Target("split")
    try:
        mon = monitor(target, 25, "--profile-window", "5", "--raw-samples", "--sqlite", db,
                      "--clickhouse-url", clickhouse.url, "--ch-flush-interval", "1")
        truth = target.finish()
        mon.stop()
    finally:
        target.kill()
    assert mon.returncode == 0, mon.stderr
    raw, agg, unresolved, windows = sqlite_layouts(db)
    ch_raw, ch_agg, ch_unresolved = clickhouse_layouts(clickhouse)
    assert unresolved == 0 and ch_unresolved == 0
    # 5 s windows, aligned to multiples of 5 s since the epoch
    assert windows == (5000000, 5000000, 0), windows
    counts = {name: per_function(rows) for name, rows in
              (("sqlite raw", raw), ("sqlite aggregated", agg), ("clickhouse raw", ch_raw),
               ("clickhouse aggregated", ch_agg))}
    print(counts, truth)
    assert len({tuple(sorted(c.items())) for c in counts.values()}) == 1, counts
    # per stack too, not only per function
    assert sorted(raw) == sorted(agg) == sorted(ch_raw) == sorted(ch_agg)
    # pyebpf(7)'s queries, the folded stacks over two windows in the middle
    con = sqlite3.connect(db)
    first = con.execute("SELECT min(time_us) FROM ebpf_py_stack_profile").fetchone()[0]
    answers = check_documented_queries(db, clickhouse, first + 5000000, first + 15000000)
    assert sum(int(line[0].rsplit(" ", 1)[1]) for line in answers["folded ch agg"]) > 100
    got = counts["sqlite aggregated"]
    total = sum(got.values())
    assert total > 500, got  # 25 s at 99 Hz of a busy thread: ~2,500 (1,342 on a loaded machine)
    spent = sum(truth.values())
    for f in FUNCS:
        share, own = got[f] / total, truth[f] / spent
        assert abs(share - own) <= 0.03, (f, share, own, got, truth)
    # the target's split is the one it was written for (only shows the phases happened)
    assert abs(truth["a"] / spent - 0.5) < 0.1 and abs(truth["c"] / spent - 0.2) < 0.1, truth


DAY_US = 86400 * 1000000


def retain_bound_us(days, now_us):
    """The start of the UTC day `days` before today's: rows before it go."""
    return (now_us // DAY_US - days) * DAY_US


def pystack_run(target, seconds, *args, env=None):
    t = Tool("pystack", ["-p", str(target.pid), "-e", "fleet"] + list(args), json_mode=False,
             env=dict(os.environ, **(env or {})))
    t.wait_ready()
    time.sleep(seconds)
    return t.stop()


def old_rows(now_us, bound):
    """(time_us, kept) of synthetic rows around the bound: far back, a second before it,
    the bound itself, and a day ago."""
    return [(now_us - 10 * DAY_US, False), (bound - 1000000, False), (bound, True), (now_us - DAY_US, True)]


def test_sqlite_retention_deletes_exactly_the_old_rows_while_read_and_written(tmp_path):
    """--retain-days 3 with the hourly pass forced every second: the rows before the bound
    go (also 100,000 of them: deleted in chunks while the run writes and a reader reads),
    the others stay, and every sample of the run is stored."""
    import threading
    db = str(tmp_path / "retain.db")
    target = Target("split")
    target.go()
    try:
        first = pystack_run(target, 1, "--sqlite", db)
        assert first.returncode == 0, first.stderr
        now_us = int(time.time() * 1e6)
        bound = retain_bound_us(3, now_us)
        con = sqlite3.connect(db)
        cols = [r[1] for r in con.execute("PRAGMA table_info(ebpf_py_stack_profile)")]
        marks = old_rows(now_us, bound)

        def row(t_us, tid):
            vals = {"env": "fleet", "host": "old", "time": "x", "time_us": t_us, "window_end": "x",
                    "window_end_us": t_us + 10000000, "pid": 1, "tid": tid, "container_pid": 1,
                    "thread_name": "x", "task": "", "stack_id": 42, "samples": 1}
            return [vals.get(c) for c in cols]
        ins = "INSERT INTO ebpf_py_stack_profile VALUES (%s)" % ",".join("?" * len(cols))
        con.executemany(ins, [row(t, i) for i, (t, _) in enumerate(marks)])
        con.executemany(ins, [row(bound - 2 * DAY_US + i, 1000 + i) for i in range(100000)])
        con.commit()
        before = con.execute("SELECT count(*) FROM ebpf_py_stack_profile WHERE host != 'old'").fetchone()[0]
        stop, reads, errors = threading.Event(), [], []

        def reader():
            r = sqlite3.connect(db, timeout=1)
            while not stop.is_set():
                t0 = time.time()
                try:
                    r.execute("SELECT count(*), sum(samples) FROM ebpf_py_stack_profile").fetchone()
                except sqlite3.Error as e:
                    errors.append(str(e))
                reads.append(time.time() - t0)
        th = threading.Thread(target=reader)
        th.start()
        try:
            second = pystack_run(target, 5, "--sqlite", db, "--retain-days", "3", "--profile-window", "1",
                                 env={"PYEBPF_RETAIN_INTERVAL_S": "1"})
        finally:
            stop.set()
            th.join()
    finally:
        target.kill()
    assert second.returncode == 0, second.stderr
    assert "100002 rows before" in second.stderr, second.stderr
    assert not errors and len(reads) > 10, (errors, len(reads))
    left = {t for (t,) in con.execute("SELECT time_us FROM ebpf_py_stack_profile WHERE host = 'old'")}
    assert left == {t for t, kept in marks if kept}, (left, marks)
    # the runs' own rows: all there, every sample of the second run counted once
    samples = int(re.search(r"samples=(\d+)", second.stderr).group(1))
    total = con.execute("SELECT sum(samples) FROM ebpf_py_stack_profile WHERE host != 'old'").fetchone()[0]
    assert con.execute("SELECT count(*) FROM ebpf_py_stack_profile WHERE host != 'old'").fetchone()[0] > before
    first_samples = int(re.search(r"samples=(\d+)", first.stderr).group(1))
    assert total == first_samples + samples, (total, first_samples, samples)


def test_clickhouse_retention_drops_old_day_partitions(clickhouse):
    """--retain-days 3 on 18.16 (no TTL): tables by day; the pass (forced every second)
    drops the partitions before the bound, keeps the others."""
    target = Target("split")
    target.go()
    try:
        first = pystack_run(target, 1, "--clickhouse-url", clickhouse.url, "--retain-days", "3")
        assert first.returncode == 0, first.stderr
        create = clickhouse.query("SHOW CREATE TABLE ebpf_py_stack_profile")
        assert "PARTITION BY toDate(time)" in create, create
        now_us = int(time.time() * 1e6)
        bound = retain_bound_us(3, now_us)
        marks = old_rows(now_us, bound)
        rows = "\n".join(json.dumps({"env": "fleet", "host": "old", "time": t // 1000000, "time_us": t,
                                     "window_end": t // 1000000 + 10, "window_end_us": t + 10000000,
                                     "pid": 1, "tid": i, "container_pid": 1, "thread_name": "x", "task": "",
                                     "stack_id": 42, "samples": 1}) for i, (t, _) in enumerate(marks))
        clickhouse.query("INSERT INTO ebpf_py_stack_profile FORMAT JSONEachRow\n" + rows)
        assert clickhouse.count("ebpf_py_stack_profile", "host = 'old'") == 4
        second = pystack_run(target, 3, "--clickhouse-url", clickhouse.url, "--retain-days", "3",
                             env={"PYEBPF_RETAIN_INTERVAL_S": "1"})
        assert second.returncode == 0, second.stderr
    finally:
        target.kill()
    left = {int(t) for (t,) in clickhouse.rows("SELECT time_us FROM ebpf_py_stack_profile WHERE host = 'old'")}
    assert left == {t for t, kept in marks if kept}, (left, marks)
    assert "retention: partition" in second.stderr, second.stderr
    assert clickhouse.count("ebpf_py_stack_profile", "host != 'old'") > 0


def test_newer_clickhouse_ttl_expires_the_rows_the_partition_pass_would(tmp_path):
    """--retain-days 3 on a server with TTL (19.6+: chDB's 26.x engine behind
    chdb_server.py): the tables get a TTL that expires exactly the rows before the bound
    of the 18.16 test (the start of the UTC day 3 days back), with no retention pass
    running: after a merge (OPTIMIZE FINAL) the older rows are gone, the others there;
    and the columns get codecs."""
    why = chdb_server.available()
    if why:
        pytest.skip(why)
    ch = chdb_server.ChdbClickHouse(tmp_path)
    try:
        r = run([tool_path("hostnet"), "-c", "2", "-i", "0.1", "-e", "fleet", "--clickhouse-url", ch.url,
                 "--retain-days", "3", "--ch-flush-interval", "0.1"])
        assert "ebpf_host_net_health: landed=2 dropped=0" in r.stderr, r.stderr
        create = ch.query("SHOW CREATE TABLE ebpf_host_net_health")
        assert "TTL toStartOfDay(time, \\'UTC\\') + toIntervalDay(4)" in create, create
        assert "`time_us` UInt64 CODEC(Delta(8), ZSTD(1))" in create, create
        now_us = int(time.time() * 1e6)
        marks = old_rows(now_us, retain_bound_us(3, now_us))
        ch.query("INSERT INTO ebpf_host_net_health (env, host, time, time_us) VALUES " + ", ".join(
            "('fleet', 'old', %d, %d)" % (t // 1000000, t) for t, _ in marks))
        # the server may apply the TTL as it writes a part (26.x does, not always); a merge does
        ch.query("OPTIMIZE TABLE ebpf_host_net_health FINAL")
        left = {int(t) for (t,) in ch.rows("SELECT time_us FROM ebpf_host_net_health WHERE host = 'old'")}
        assert left == {t for t, kept in marks if kept}, (left, marks)
        assert ch.count("ebpf_host_net_health", "host != 'old'") == 2
    finally:
        ch.close()


def test_cluster_two_shards_one_stopped_6_s_nothing_lost_or_doubled(tmp_path):
    """--clickhouse-cluster on a real two-shard cluster of 18.16 servers (127.0.0.1 and
    127.0.0.2, the same HTTP port, own tcp ports and dirs, remote_servers naming both):
    two "hosts" (own UTS namespaces and hostnames), each writing through the other
    host's shard, so that every insert crosses shards. Shard B is stopped for 6 s in the
    middle: run 1's own inserts (into B) are retried by the sink, run 2's rows for B wait
    in A's Distributed queue. Then every sample of each run (--also-stdout: the ground
    truth) is a row exactly once, on its host's shard; the aggregated sums match; every
    stack_id resolves; retention (forced every second) dropped the old days on both."""
    from clickhouse_server import cluster_config, free_port
    http, tcp_a, tcp_b = free_port(), free_port(), free_port()
    cfg = cluster_config("fleet", [("127.0.0.1", tcp_a), ("127.0.0.2", tcp_b)])
    a = ClickHouse(tmp_path / "a", "127.0.0.1", http, tcp_a, cfg)
    b = ClickHouse(tmp_path / "b", "127.0.0.2", http, tcp_b, cfg)
    target = Target("split")
    target.go()
    runs = []
    try:
        # a hostname per shard: Distributed picks shard cityHash64(host) % 2
        names = ["fleet-host-%d" % i for i in range(16)]
        shard = dict(zip(names, [int(v) for v in a.query(
            "SELECT arrayJoin([%s]) AS h, cityHash64(h) %% 2" % ",".join("'%s'" % n for n in names)
        ).split()[1::2]]))
        host_a = next(n for n in names if shard[n] == 0)
        host_b = next(n for n in names if shard[n] == 1)
        for host, entry in ((host_a, b), (host_b, a)):
            t = Tool("pystack", ["-p", str(target.pid), "-e", "fleet", "--raw-samples", "--also-stdout",
                                 "--clickhouse-url", entry.url, "--clickhouse-cluster", "fleet",
                                 "--ch-flush-interval", "0.5", "--profile-window", "1", "--retain-days", "3"],
                     json_mode=False, env=dict(os.environ, PYEBPF_RETAIN_INTERVAL_S="1"),
                     prefix=["unshare", "--uts", "sh", "-c", 'hostname "%s" && exec "$0" "$@"' % host])
            t.json_mode = True
            runs.append((host, t))
        for _, t in runs:
            t.wait_ready()
        # old days on both shards (straight into the local tables), for the retention pass
        now_us = int(time.time() * 1e6)
        marks = old_rows(now_us, retain_bound_us(3, now_us))
        for server, host in ((a, host_a), (b, host_b)):
            rows = "\n".join(json.dumps({"env": "old", "host": host, "time": t // 1000000, "time_us": t,
                                         "window_end": t // 1000000 + 1, "window_end_us": t + 1000000, "pid": 1,
                                         "tid": i, "container_pid": 1, "thread_name": "x", "task": "",
                                         "stack_id": 42, "samples": 1}) for i, (t, _) in enumerate(marks))
            server.query("INSERT INTO ebpf_py_stack_profile_local FORMAT JSONEachRow\n" + rows)
        time.sleep(4)
        # stopped (SIGTERM), not crashed: a crash between a commit and its answer would
        # have the sink send the batch again (at least once: pyebpf(7), DATABASE SINKS)
        b.stop()
        time.sleep(6)
        b.start()
        time.sleep(4)
        for _, t in runs:
            t.stop()
            assert t.returncode == 0, t.stderr
    finally:
        target.kill()
    try:
        printed = {host: t.events("py_stack") for host, t in runs}
        assert all(len(p) > 200 for p in printed.values()), {h: len(p) for h, p in printed.items()}
        # the rows waiting in A's Distributed queue reach B once it is back
        deadline = time.time() + 60
        while time.time() < deadline:
            counts = dict((h, int(n)) for h, n in a.rows("SELECT host, count() FROM ebpf_py_stacks GROUP BY host"))
            if all(counts.get(h, 0) >= len(p) for h, p in printed.items()):
                break
            time.sleep(1)
        for host, t in runs:
            mine = printed[host]
            keys = sorted((e["tid"], e["time"]) for e in mine)
            rows = a.rows("SELECT tid, time_us FROM ebpf_py_stacks WHERE host = '%s'" % host)
            assert len(rows) == len(mine), (host, len(rows), len(mine), t.stderr[-1500:])
            assert len({tuple(r) for r in rows}) == len(rows), "doubled rows"
            assert len(keys) == len(set(keys))
            agg = int(a.query("SELECT sum(samples) FROM ebpf_py_stack_profile WHERE host = '%s' AND env = 'fleet'"
                              % host))
            assert agg == len(mine), (host, agg, len(mine))
        # each host's rows on its own shard only
        assert {h for (h,) in a.rows("SELECT DISTINCT host FROM ebpf_py_stacks_local")} == {host_a}
        assert {h for (h,) in b.rows("SELECT DISTINCT host FROM ebpf_py_stacks_local")} == {host_b}
        # every stack_id resolves on its own shard (the subquery runs on each shard, locally)
        assert a.count("ebpf_py_stack_profile", "env = 'fleet' AND stack_id NOT IN"
                       " (SELECT stack_id FROM ebpf_stacks_local)") == 0
        # pyebpf(7)'s folded stacks on the cluster (ebpf_stacks_local in the join): as the raw rows
        q = documented_queries()
        for host, _ in runs:
            got = {}
            for name in ("folded ch agg", "folded ch raw"):
                sql = q[name].replace("FROM ebpf_stacks\n", "FROM ebpf_stacks_local\n").replace("'H'", "'%s'" % host)
                # from before the runs: the old days' rows (stack 42, never in the
                # dictionary) would be an unknown stack in the LEFT JOIN of the aggregated
                t1 = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now_us / 1e6 - 600))
                sql = sql.replace("'T1'", "'%s'" % t1).replace("'T2'", "'2100-01-01 00:00:00'")
                got[name] = sorted(a.query(sql.replace("TSVRaw", "TabSeparated")).splitlines())
            assert got["folded ch agg"] == got["folded ch raw"] and got["folded ch raw"], got
            # pystack --from either node reads every shard (the Distributed tables): the
            # host's stacks as its raw rows count them
            for node in (a, b):
                res = run([tool_path("pystack"), "--from", node.url, "-e", "fleet", "--host", host, "-f"],
                          check=False, timeout=120)
                assert res.returncode == 0, res.stderr
                assert sorted(res.stdout.splitlines()) == got["folded ch raw"], (node.url, res.stdout[:500])
        # run 1 wrote into B: it saw B go away and come back
        assert "is away" in runs[0][1].stderr and "is back" in runs[0][1].stderr, runs[0][1].stderr[-2000:]
        # retention on both shards: the old days went, the kept ones stayed
        for server in (a, b):
            left = {int(t) for (t,) in server.rows("SELECT time_us FROM ebpf_py_stack_profile_local"
                                                   " WHERE env = 'old'")}
            assert left == {t for t, kept in marks if kept}, (server.url, left)
    finally:
        a.close()
        b.close()


def test_unknown_cluster_is_a_clear_start_up_error(clickhouse):
    from conftest import run, tool_path
    out = run([tool_path("pystack"), "-p", str(os.getpid()), "--clickhouse-url", clickhouse.url,
               "--clickhouse-cluster", "nowhere", "-d", "1"], check=False)
    assert out.returncode == 1, out.stderr
    assert "has no cluster 'nowhere' in system.clusters" in out.stderr, out.stderr


def test_gil_and_off_cpu_events_name_their_stacks_and_weigh_them(tmp_path):
    """pymonitor --enable gil offcpu on two CPU-bound threads (GIL waits, and the waits
    are time off the CPU): the event rows name their Python stacks by stack_id, each
    resolves in ebpf_stacks to the text --also-stdout printed, and the profile rows
    weigh each stack by the events' own time, to the microsecond."""
    db = str(tmp_path / "weighted.db")
    w = subprocess.Popen([PYTHON, os.path.join(TARGETS, "gil_workload.py"), "cpu2", "6"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert w.stdout.readline().startswith(b"ready")
        mon = Tool("pymonitor", ["-p", str(w.pid), "-e", "fleet", "--enable", "gil", "offcpu",
                                 "--offcpu-min-total-ms", "1", "--sqlite", db, "--also-stdout"], json_mode=False)
        mon.json_mode = True
        mon.wait_ready()
        w.stdin.write(b"go\n")
        w.stdin.flush()
        w.communicate(timeout=60)
        time.sleep(1)
        mon.stop()
    finally:
        if w.poll() is None:
            w.kill()
    assert mon.returncode == 0, mon.stderr
    con = sqlite3.connect(db)
    stacks = dict(con.execute("SELECT DISTINCT stack_id, stack FROM ebpf_stacks"))
    checks = (("gil_wait", "ebpf_gil_wait", "holder_py_stack", "duration_ms", "ebpf_gil_holder_profile"),
              ("off_cpu", "ebpf_off_cpu", "py_stack", "off_cpu_ms", "ebpf_off_cpu_profile"))
    for metric, table, field, weight, profile in checks:
        events = [e for e in mon.events(metric) if e.get(field) is not None]
        assert len(events) > 20, (metric, len(events))
        # the event rows: one each, the stack as its id, which resolves to the same text
        ids = [r[0] for r in con.execute("SELECT %s_id FROM %s ORDER BY rowid" % (field, table))]
        printed = [e.get(field) for e in mon.events(metric)]
        assert len(ids) == len(printed)
        assert [stacks.get(i) if i is not None else None for i in ids] == printed
        # the profile: per stack, the events' count and time
        want = {}
        for e in events:
            n, us = want.get(e[field], (0, 0))
            want[e[field]] = (n + 1, us + int(e[weight] * 1000 + 0.5))
        got = {stacks[i]: (n, us) for i, n, us in con.execute(
            "SELECT stack_id, sum(samples), sum(weight_us) FROM %s GROUP BY stack_id" % profile)}
        assert got == want, (metric, got, want)
