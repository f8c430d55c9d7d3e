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

from clickhouse_server import ClickHouse
from conftest import ROOT, TARGETS, Tool

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
            rows = [tuple(r) for r in ch.rows(fill(sql).replace("FORMAT TSVRaw", "FORMAT TabSeparated"))]
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
