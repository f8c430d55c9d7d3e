"""Bytes on disk of stored profiles: one pymonitor run (--raw-samples) writes a 25-frame,
~200-stack workload (tests/targets/py_profile.py deep) into ClickHouse and SQLite in
both layouts, a row per sample (ebpf_py_stacks) and aggregated (ebpf_py_stack_profile
+ ebpf_stacks); then the bytes of each layout. Goal of issue 29: aggregated at least
20x smaller.

ClickHouse: system.parts.bytes_on_disk of the active parts after OPTIMIZE FINAL, on
Debian's 18.16 and, when tests/integration/chdb_fetch.sh has installed it, on chDB's
26.x engine (column codecs) written by a second pymonitor sampling the same target.
SQLite: the file, copied twice, each copy keeping one layout's tables, VACUUMed.
Per profiled CPU-hour: the rows per hour of run (raw; aggregated rows) plus, for the
aggregated layout, the whole dictionary once per hour (conservative: it is written
once per host, run and day).

usage: profiles_bench.py BUILD SECONDS
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import chdb_server  # noqa: E402
from clickhouse_server import ClickHouse  # noqa: E402

RAW = ["ebpf_py_stacks"]
AGG = ["ebpf_py_stack_profile", "ebpf_stacks"]


def sqlite_bytes(db, keep, tmp):
    copy = os.path.join(tmp, "copy.db")
    shutil.copy(db, copy)
    con = sqlite3.connect(copy)
    for (name,) in list(con.execute("SELECT name FROM sqlite_master WHERE type='table'")):
        if name not in keep:
            con.execute('DROP TABLE "%s"' % name)
    con.commit()
    con.execute("VACUUM")
    con.close()
    size = os.path.getsize(copy)
    os.unlink(copy)
    return size


def ch_bytes(ch, tables):
    out = {}
    for t in tables:
        ch.query("OPTIMIZE TABLE %s FINAL" % t)
        out[t] = int(ch.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = "
                              "'default' AND table = '%s'" % t) or 0)
    return out


def start_monitor(build, pid, seconds, *sink):
    mon = subprocess.Popen([os.path.join(build, "pymonitor"), "-p", str(pid), "-e", "bench", "--enable",
                            "py_stack", "--raw-samples", *sink, "-d", str(seconds + 15)],
                           stderr=subprocess.PIPE, text=True)
    # ready: the sampler's banner
    err = ""
    while "Hit Ctrl-C" not in err:
        line = mon.stderr.readline()
        if not line:
            raise SystemExit("pymonitor did not start: " + err)
        err += line
    return mon, err


def end_monitor(mon, err):
    err += mon.stderr.read()
    mon.wait()
    if mon.returncode:
        raise SystemExit("pymonitor failed: " + err)
    return err


def main():
    build, seconds = sys.argv[1], float(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="pyebpf-profiles-")
    ch = ClickHouse(os.path.join(tmp, "ch"))
    why = chdb_server.available()
    new = None if why else chdb_server.ChdbClickHouse(tmp)
    db = os.path.join(tmp, "p.db")
    target = subprocess.Popen(["/usr/bin/python3.11", os.path.join(ROOT, "tests", "targets", "py_profile.py"),
                               "deep"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert target.stdout.readline().strip() == b"ready"
        mon = start_monitor(build, target.pid, seconds, "--sqlite", db, "--clickhouse-url", ch.url)
        mon_new = new and start_monitor(build, target.pid, seconds, "--clickhouse-url", new.url)
        target.stdin.write(b"go\n")
        target.stdin.flush()
        time.sleep(seconds)
        target.kill()
        end_monitor(*mon)
        if mon_new:
            end_monitor(*mon_new)
        con = sqlite3.connect(db)
        samples = con.execute("SELECT count(*) FROM ebpf_py_stacks").fetchone()[0]
        stacks = con.execute("SELECT count(DISTINCT stack_id) FROM ebpf_stacks").fetchone()[0]
        depth = con.execute("SELECT max(depth) FROM ebpf_stacks").fetchone()[0]
        rows = con.execute("SELECT count(*) FROM ebpf_py_stack_profile").fetchone()[0]
        con.close()
        print("   %.0f s, %d samples (%.0f/s), %d distinct stacks of up to %d frames, %d aggregated rows"
              " (--profile-window 10)" % (seconds, samples, samples / seconds, stacks, depth, rows))
        sizes = {"sqlite": ({"raw": sqlite_bytes(db, RAW, tmp)},
                            {"aggregated": sqlite_bytes(db, AGG, tmp)}),
                 "clickhouse": (ch_bytes(ch, RAW), ch_bytes(ch, AGG))}
        if new:
            sizes["ch-26.x"] = (ch_bytes(new, RAW), ch_bytes(new, AGG))
        # the dictionary alone (for the per-hour figure): SQLite by its own copy
        dict_bytes = {"sqlite": sqlite_bytes(db, ["ebpf_stacks"], tmp)}
        for sink in sizes:
            if sink != "sqlite":
                dict_bytes[sink] = sizes[sink][1]["ebpf_stacks"]
        print("   %-10s %12s %12s %7s   per CPU-hour: %12s %12s %7s" % (
            "sink", "raw bytes", "aggregated", "ratio", "raw", "aggregated", "ratio"))
        for sink, (raw, agg) in sizes.items():
            r, a = sum(raw.values()), sum(agg.values())
            hour = 3600 / seconds
            r_h, a_h = r * hour, (a - dict_bytes[sink]) * hour + dict_bytes[sink]
            print("   %-10s %12d %12d %6.1fx   %23.0f %12.0f %6.1fx" % (sink, r, a, r / a, r_h, a_h, r_h / a_h))
        if why:
            print("   (%s)" % why)
        else:
            print("   (clickhouse: Debian's 18.16; ch-26.x: chDB's engine, codecs, a second pymonitor)")
    finally:
        if target.poll() is None:
            target.kill()
        ch.close()
        if new:
            new.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
