"""pyoffcpu --from and pygil --from (issue 27): stored off_cpu and gil_wait events drawn
as the live run draws them.

The arrangement: gil_workload.py sleeper (spinner-a spins, sleeper sleeps 10 ms at a
time: GIL waits both ways and off-CPU periods in sleeps and in the GIL's futex), traced
at once by pyoffcpu and pygil, each writing its live folded stacks (-o FILE.txt), its
events as JSON lines (-j --also-stdout) and, in the same run, the same events through the
real SQLite and ClickHouse sinks. The tools start after the target's threads and stop
while they still run (the live folded stacks name threads when they are written).

Ground truths: the live JSON events, folded here as the tools fold them, give exactly
what --from must print: the same stacks, each with its events' times added up. The
live folded files (pyoffcpu sums its periods in the kernel, apart from the records;
pygil its waits in user space) have the same stacks, and their times within the
rounding by design: a record's duration_ms has three decimals, so a stored stack's
time is whole microseconds per event added up, a live one nanoseconds added up, cut to
microseconds at the end (pygil -f: cut per wait). They differ by under a microsecond
per event.
"""
import os
import sqlite3
import subprocess
import time

import pytest

import chdb_server
from clickhouse_server import TESTER_PASSWORD, ClickHouse
from conftest import TARGETS, Tool, run, tool_path
from test_profile_diff import sorted_lines

PYTHON = "/usr/bin/python3.11"
WORKLOAD = os.path.join(TARGETS, "gil_workload.py")
SECONDS = 6


def trace(tmp, ch_url):
    """gil_workload.py sleeper traced by pyoffcpu and pygil at once, into SQLite files
    and the ClickHouse at ch_url: {db, live, events, stderr} per tool."""
    out = {"tmp": tmp, "ch": ch_url, "db": {}, "live": {}}
    w = subprocess.Popen([PYTHON, WORKLOAD, "sleeper", "600"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    tools = {}
    try:
        assert w.stdout.readline().startswith(b"ready")
        # the threads first: a record names a thread as the tool knows it then, the
        # live folded stacks as it knows it at the end (a thread new to the tool is
        # its comm until its Python name is read)
        w.stdin.write(b"go\n")
        w.stdin.flush()
        # every off-CPU period: spinner-a's GIL waits (its forced switches, about 100 a
        # second) last tens of microseconds, and whether any reaches 1 ms is luck
        for name, args in (("pyoffcpu", ["--min-ms", "0"]), ("pygil", [])):
            out["db"][name] = str(tmp / (name + ".db"))
            out["live"][name] = str(tmp / (name + "_live.txt"))
            tools[name] = Tool(name, ["-p", str(w.pid), "-e", "ev", "-o", out["live"][name], "--sqlite",
                                      out["db"][name], "--clickhouse-url", ch_url,
                                      "--ch-flush-interval", "1", "--also-stdout"] + args)
        for t in tools.values():
            t.wait_ready(timeout=600)
        time.sleep(SECONDS)
        for t in tools.values():
            t.stop()
            assert t.returncode == 0, t.stderr[-2000:]
    finally:
        w.kill()
        w.wait()
        for t in tools.values():
            if t.proc.poll() is None:
                t.proc.kill()
    out["stderr"] = {n: t.stderr for n, t in tools.items()}
    out["events"] = {"pyoffcpu": tools["pyoffcpu"].events("off_cpu"), "pygil": tools["pygil"].events("gil_wait")}
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stored")
    server = ClickHouse(tmp / "clickhouse")
    try:
        out = trace(tmp, server.url)
        out["server"] = server
        yield out
    finally:
        server.close()


def from_(tool, source, *args):
    return run([tool_path(tool), "--from", source, "-e", "ev"] + list(args), check=False, timeout=120)


def lines_of(path):
    with open(path) as f:
        return sorted_lines(f.read())


def folded_dict(lines):
    return {l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in lines}


def fold(events, key_of):
    """Per folded stack of the live events: [events, their whole microseconds]."""
    out = {}
    for e in events:
        key = key_of(e)
        if key is not None:
            n, us = out.get(key, (0, 0))
            out[key] = (n + 1, us + round(e["duration_ms"] * 1000))
    return out


def off_cpu_key(e):
    """An off_cpu event's stack as pyoffcpu -f folds it: thread (';' and ' ' as '_'),
    Python frames, native frames from the outermost (';' in a user frame as ',')."""
    parts = [e["thread_name"].replace(";", "_").replace(" ", "_")]
    parts += [e["py_stack"]] if e["py_stack"] else []
    parts += [f.replace(";", ",") for f in reversed(e["user_stack"])]
    parts += list(reversed(e["kernel_stack"]))
    return ";".join(parts)


def holder_key(e):
    """A gil_wait's holder stack as pygil -f shows it (none: not counted)."""
    h = e.get("holder_py_stack")
    return None if h is None else h or "[no Python frames]"


def check_live_file(live, truth, stderr):
    """The live folded file: the same stacks, each within half a microsecond per event
    (and the cut to whole microseconds) of the stored events' time."""
    want = {k for k, (_, us) in truth.items() if us}
    # on a failure: what differs, and the tool's summary (records lost or dropped?)
    assert set(live) == want, ({k: live[k] for k in set(live) - want}, {k: truth[k] for k in want - set(live)},
                               [l for l in stderr.splitlines() if "summary" in l])
    for stack, us in live.items():
        n, want = truth[stack]
        assert abs(us - want) <= n / 2 + 1, (stack, us, want, n)


def test_pyoffcpu_from_draws_the_live_events(stored):
    """--from -f on the stored events prints the live events' stacks and times exactly;
    -o FILE.txt the same lines; ClickHouse's rows the same; the live run's own folded
    file (the kernel's sums) within the rounding."""
    truth = fold(stored["events"]["pyoffcpu"], off_cpu_key)
    want = {k: us for k, (_, us) in truth.items() if us}
    got = from_("pyoffcpu", "sqlite:" + stored["db"]["pyoffcpu"], "-f")
    assert got.returncode == 0, got.stderr
    assert folded_dict(sorted_lines(got.stdout)) == want, stored["stderr"]["pyoffcpu"][-2000:]
    assert "read %d off_cpu events" % len(stored["events"]["pyoffcpu"]) in got.stderr, got.stderr
    check_live_file(folded_dict(lines_of(stored["live"]["pyoffcpu"])), truth, stored["stderr"]["pyoffcpu"])
    roots = {}
    for stack, (n, us) in truth.items():
        was = roots.get(stack.split(";")[0], (0, 0))
        roots[stack.split(";")[0]] = (was[0] + n, was[1] + us)
    # both threads were off the CPU: the sleeper in its sleeps, spinner-a in the GIL's wait
    assert roots.get("sleeper", (0, 0))[1] > SECONDS * 1e6 * 0.3 and roots.get("spinner-a", (0, 0))[0] >= 50, roots
    assert any("sleeper (" in k and "[kernel]" in k for k in want), list(want)[:5]
    txt = str(stored["tmp"] / "off_from.txt")
    res = from_("pyoffcpu", "sqlite:" + stored["db"]["pyoffcpu"], "-o", txt)
    assert res.returncode == 0 and res.stdout == "", res.stderr
    assert lines_of(txt) == sorted_lines(got.stdout)
    auth = ["--clickhouse-user", "tester", "--clickhouse-password", TESTER_PASSWORD]
    ch = from_("pyoffcpu", stored["ch"], "-f", *auth)
    assert ch.returncode == 0, ch.stderr
    assert sorted_lines(ch.stdout) == sorted_lines(got.stdout)
    # -p and --host choose rows there too
    pid = str(stored["events"]["pyoffcpu"][0]["pid"])
    assert sorted_lines(from_("pyoffcpu", stored["ch"], "-f", "-p", pid, *auth).stdout) == sorted_lines(got.stdout)
    assert from_("pyoffcpu", stored["ch"], "-f", "--host", "elsewhere", *auth).returncode == 1
    # the pictures of the stored events: each written, of its own kind
    for name, magic in (("off.svg", b"<?xml"), ("off.pb.gz", b"\x1f\x8b"), ("off.speedscope.json", b"{")):
        path = str(stored["tmp"] / name)
        res = from_("pyoffcpu", stored["ch"], "-o", path, *auth)
        assert res.returncode == 0, res.stderr
        with open(path, "rb") as f:
            assert f.read(5).startswith(magic), name


def test_pygil_from_draws_the_live_holder_stacks(stored):
    """--from -f and -o FILE.txt on the stored waits print the live waits' holder stacks
    and times exactly; the table their top ten; ClickHouse's rows the same; the live
    run's own folded file within the rounding."""
    db = "sqlite:" + stored["db"]["pygil"]
    truth = fold(stored["events"]["pygil"], holder_key)
    want = {k: us for k, (_, us) in truth.items() if us}
    assert sum(n for n, _ in truth.values()) > 50, truth
    folded = from_("pygil", db, "-f")
    assert folded.returncode == 0, folded.stderr
    assert folded_dict(sorted_lines(folded.stdout)) == want
    txt = str(stored["tmp"] / "gil_from.txt")
    res = from_("pygil", db, "-o", txt)
    assert res.returncode == 0, res.stderr
    assert lines_of(txt) == sorted_lines(folded.stdout)
    check_live_file(folded_dict(lines_of(stored["live"]["pygil"])), truth, stored["stderr"]["pygil"])
    assert any(k.endswith(")") and "spin (" in k for k in want), list(want)[:5]
    table = from_("pygil", db)
    assert table.returncode == 0, table.stderr
    rows = [l.split(None, 2) for l in table.stdout.splitlines()[1:] if l.strip()]
    top = sorted(truth.items(), key=lambda kv: -kv[1][1])[:10]
    assert sorted((r[2], round(float(r[0]) * 1000), int(r[1])) for r in rows) == \
        sorted((k, us, n) for k, (n, us) in top), (table.stdout, top)
    auth = ["--clickhouse-user", "tester", "--clickhouse-password", TESTER_PASSWORD]
    ch = from_("pygil", stored["ch"], "-f", *auth)
    assert ch.returncode == 0, ch.stderr
    assert sorted_lines(ch.stdout) == sorted_lines(folded.stdout)


def test_bad_input_says_why_and_writes_nothing(stored, tmp_path):
    """An empty range, an unknown table layout (SQLite and ClickHouse), nothing to draw,
    a range without a source: one line saying why, exit 1 (2 for a usage error), no -o
    file."""
    out = str(tmp_path / "out.svg")
    other = str(tmp_path / "other.db")
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE ebpf_off_cpu (env TEXT, host TEXT, time_us INTEGER)")
    con.execute("CREATE TABLE ebpf_gil_wait (env TEXT, host TEXT, time_us INTEGER, duration_ms REAL)")
    con.commit()
    con.close()
    stored["server"].query("CREATE DATABASE IF NOT EXISTS empty")
    for tool, metric in (("pyoffcpu", "off_cpu"), ("pygil", "gil_wait")):
        db = "sqlite:" + stored["db"][tool]
        cases = [
            (["--from", db, "--since", "2001-01-01", "--until", "2001-01-02", "-o", out], 1,
             "no %s events stored (env ev, since 2001-01-01T00:00:00.000000Z, until 2001-01-02" % metric),
            (["--from", db, "-p", "1", "-o", out], 1, "no %s events stored (env ev, pid 1)" % metric),
            (["--from", "sqlite:" + other, "-o", out], 1, "not the stored profile layout"),
            (["--from", stored["ch"], "--clickhouse-database", "empty", "-o", out], 1,
             "not the stored profile layout"),
            (["--from", "mysql://x", "-o", out], 2, "--from mysql://x: say sqlite:FILE"),
            (["--since", "-1h", "-o", out], 2, "need --from"),
            (["--from", db, "--children", "-o", out], 2, "--from draws stored"),
        ]
        if tool == "pyoffcpu":
            cases.append((["--from", db], 2, "--from draws the stored events' stacks: say -f or -o FILE"))
            cases.append((["--from", db, "--min-ms", "5", "-o", out], 2, "not with --min-ms, which sets how to trace"))
        else:
            cases.append((["--from", db, "--hook", "condvar", "-o", out], 2, "not with --hook, which sets how to trace"))
        cases.append((["--from", db, "--sqlite", str(tmp_path / "x.db"), "-o", out], 2,
                      "--from reads a database: not with --sqlite"))
        for args, code, message in cases:
            res = run([tool_path(tool), "-e", "ev"] + args, check=False, timeout=120)
            assert res.returncode == code, (tool, args, res.returncode, res.stderr)
            errors = [l for l in res.stderr.splitlines() if "error" in l or message in l]
            assert message in res.stderr and len(errors) == 1, (tool, args, res.stderr)
            assert res.stdout == "", (tool, args, res.stdout)
            assert not os.path.exists(out), (tool, args)


def test_newer_clickhouse_reads_the_same(tmp_path):
    """A 26.x ClickHouse (chDB behind chdb_server.py): --from reads its rows as it reads
    18.16's, the same lines as from the same run's SQLite file (pystack's: also the
    live run's -o FILE.txt)."""
    why = chdb_server.available()
    if why:
        pytest.skip(why)
    ch = chdb_server.ChdbClickHouse(tmp_path / "chdb")
    try:
        out = trace(tmp_path, ch.url)
        for tool in ("pyoffcpu", "pygil"):
            from_sqlite = from_(tool, "sqlite:" + out["db"][tool], "-f")
            from_ch = from_(tool, ch.url, "-f")
            assert from_sqlite.returncode == 0 and from_ch.returncode == 0, (from_sqlite.stderr, from_ch.stderr)
            assert sorted_lines(from_ch.stdout) == sorted_lines(from_sqlite.stdout) != [], tool
        # pystack's aggregated rows: the same query's other layout, summed per window
        db, live = str(tmp_path / "pystack.db"), str(tmp_path / "pystack_live.txt")
        w = subprocess.Popen([PYTHON, WORKLOAD, "cpu2", "600"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert w.stdout.readline().startswith(b"ready")
            w.stdin.write(b"go\n")
            w.stdin.flush()
            t = Tool("pystack", ["-p", str(w.pid), "-F", "199", "-e", "ev", "--lines", "-o", live, "--sqlite", db,
                                 "--clickhouse-url", ch.url, "--ch-flush-interval", "1", "--profile-window", "1"],
                     json_mode=False)
            t.wait_ready(timeout=600)
            time.sleep(4)
            t.stop()
            assert t.returncode == 0, t.stderr[-2000:]
        finally:
            w.kill()
            w.wait()
        from_ch = from_("pystack", ch.url, "-f")
        assert from_ch.returncode == 0, from_ch.stderr
        assert sorted_lines(from_ch.stdout) == sorted_lines(from_("pystack", "sqlite:" + db, "-f").stdout) \
            == lines_of(live) != []
    finally:
        ch.close()
