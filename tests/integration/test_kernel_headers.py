"""Every BPF tool compiles with pyebpf's built-in header set and still sees its events.

A host without kernel headers is the same as --kernel-headers naming an empty folder:
each tool runs that way against a real target, and its events are checked with the
same ground truths as in the tool's own test file (whose helpers these reuse).
"""
import os
import re
import subprocess
import time

import pytest

from conftest import TARGETS
import test_pygc
import test_pygil
import test_pyhandoff
import test_pyloop
import test_pyoffcpu
import test_pystack
import test_tcphandshake
import test_tcploss

BUILTIN = "kernel headers: pyebpf's built-in minimal headers"


@pytest.fixture
def empty_headers(run_tool, tmp_path):
    """run_tool with --kernel-headers EMPTY_DIR appended; the started tools in .started."""
    folder = tmp_path / "no-headers"
    folder.mkdir()

    def start(name, *args, **kw):
        t = run_tool(name, *args, "--kernel-headers", str(folder), **kw)
        start.started.append(t)
        return t

    start.started = []
    return start


def said_builtin(tools):
    assert tools
    for t in tools:
        assert BUILTIN in t.stderr, t.stderr
        assert "has no kernel headers" in t.stderr


def test_builtin_pystack(empty_headers):
    script = os.path.join(TARGETS, "py_recurse.py")
    line = test_pystack.busy_line(script)
    target = subprocess.Popen(["/usr/bin/python3", script, "40"], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().split() == ["ready", "40"]
        t0 = time.monotonic()
        tool = empty_headers("pystack", "-p", str(target.pid), "-F", "199")
        ready = time.monotonic() - t0
        time.sleep(2)
        tool.stop()
    finally:
        target.kill()
        target.wait()
    assert tool.returncode == 0, tool.stderr
    said_builtin([tool])
    stacks = tool.events("py_stack")
    summary = tool.events("pystack_summary")[0]
    print("ready after %.2f s, %d stacks, summary %s" % (ready, len(stacks), summary))
    assert len(stacks) > 100 and summary["python_stacks"] == len(stacks)
    for e in stacks:
        frames = e["stack"].split(";")
        # <module>, 40 rec, leaf at the busy line: the whole chain, nothing invented
        assert e["status"] == "complete" and e["stack_depth"] == 42, e
        assert frames[0].startswith("<module> (") and frames[-1] == "leaf (%s:%d)" % (script, line)
        assert all(f.startswith("rec (%s:" % script) for f in frames[1:-1])


def test_builtin_pygc(empty_headers):
    cmd = ["/usr/bin/python3"]  # Debian's: the USDT hook
    tool, recs, stats, _ = test_pygc.trace_workload(empty_headers, cmd)
    said_builtin(empty_headers.started)
    evs = test_pygc.check_against_callbacks(tool.events("gc_pause"), recs, stats)
    assert {e["hook"] for e in evs} == {"usdt"}


def test_builtin_pyhandoff(empty_headers):
    events, used, pid, _ = test_pyhandoff.fdreuse_run(empty_headers)
    said_builtin(empty_headers.started)
    got = test_pyhandoff.handoffs(events)
    assert len(got) == 1, got
    assert got[0]["fd"] == used["handoff"] and got[0]["main_tid"] == pid


def test_builtin_tcphandshake(empty_headers):
    tool, result, _ = test_tcphandshake.connect_and_trace(empty_headers, "4")
    said_builtin([tool])
    port = result["port"]
    connects = [e for e in tool.events("tcp_connect") if e["dst_port"] == port]
    assert sorted(e["src_port"] for e in connects) == sorted(result["client_ports"])
    assert sorted(e["src_port"] for e in tool.events("tcp_accept")) == sorted(result["client_ports"])


def test_builtin_tcploss(empty_headers, netns_pair):
    ns = netns_pair
    tool = empty_headers("tcploss", "--port", "9", "--filter-ip", ns.client_ip)
    rst0, = test_tcploss.nstat(ns.server, ns, "TcpOutRsts")
    client = test_tcploss.start(ns, ns.client, "refused", ns.server_ip, 9)
    truth = test_tcploss.said(client)
    client.wait(timeout=30)
    rst1, = test_tcploss.nstat(ns.server, ns, "TcpOutRsts")
    time.sleep(0.5)
    tool.stop()
    said_builtin([tool])
    assert truth["event"] == "refused" and rst1 - rst0 == 1
    received = test_tcploss.of(tool, "reset_received")
    sent = test_tcploss.of(tool, "reset_sent")
    assert len(received) == 1 and len(sent) == 1, tool.stdout
    assert received[0]["pid"] == truth["pid"] and sent[0]["reason"] == "NO_SOCKET"


def test_builtin_pygil(empty_headers):
    """Two CPU-bound threads on Debian's 3.11 (the default futex hook: its tracepoint
    arguments come from tracefs, not from headers): each waits, about wall - cpu, for
    the other."""
    w = test_pygil.Workload(["/usr/bin/python3.11"], "cpu2", 2)
    try:
        tool, (threads,) = test_pygil.trace(empty_headers, [w])
    finally:
        w.kill()
    said_builtin([tool])
    events = tool.events("gil_wait")
    for name in ("spinner-a", "spinner-b"):
        t = threads[name]
        mine = test_pygil.waits_of(events, w.pid, t["native_id"])
        test_pygil.assert_wait_matches("built-in headers", t, sum(e["duration_ms"] for e in mine))
        assert {e["hook"] for e in mine} == {"futex"}


def test_builtin_pyloop(empty_headers):
    """A selectors loop on Debian's 3.11 that stalls in a 150 ms sleep and 120 ms of CPU
    by turns: each stall the target timed itself is one stall of that length, with the
    function that made it."""
    target = subprocess.Popen(["/usr/bin/python3.11", test_pyloop.STALLS, "selectors",
                               "sleep:150,cpu:120", "300"], stdout=subprocess.PIPE)
    try:
        tool = empty_headers("pyloop", "-p", str(target.pid))
        start = time.time()
        time.sleep(4)
        window = (start, time.time())
        tool.stop()
        assert tool.returncode == 0, tool.stderr
        said_builtin([tool])
        test_pyloop.same_stalls_as_the_target_says(tool, target, window)
    finally:
        target.kill()
        target.wait()


def test_builtin_pyoffcpu(empty_headers):
    """A thread in time.sleep(2) loops on Debian's 3.11: 2000 ms +-2% off the CPU, in S,
    at the sleeping line."""
    target = subprocess.Popen(["/usr/bin/python3.11", test_pyoffcpu.SCRIPT, "sleep", "2"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().split()[:1] == ["ready"]
        tool = empty_headers("pyoffcpu", "-p", str(target.pid))
        time.sleep(5)
        tool.stop()
    finally:
        target.kill()
        target.wait()
    assert tool.returncode == 0, tool.stderr
    said_builtin([tool])
    sleeps = test_pyoffcpu.by_thread(tool.events("off_cpu"), "sleeper").get(target.pid, [])
    assert len(sleeps) >= 1, tool.stdout[-2000:]
    failures = []
    for e in sleeps:
        assert 1960 <= e["off_cpu_ms"] <= 2040 and e["prev_state"] == "S", e
        test_pyoffcpu.check_python_stack(e, "sleeper", test_pyoffcpu.marked_line("SLEEP"), failures, "3.11")
    assert not failures, failures


def test_every_bpf_tool_is_covered():
    """A new BPF tool must get a case above (tools whose tracker compiles BPF text)."""
    root = os.path.dirname(os.path.dirname(TARGETS))
    trackers = os.path.join(root, "src", "trackers")
    bpf = sorted(f[:-2] for f in os.listdir(trackers)
                 if f.endswith(".c") and "_bpf_text[]" in open(os.path.join(trackers, f)).read())
    tested = sorted(n[13:] for n in globals() if n.startswith("test_builtin_"))
    assert bpf and tested == bpf
