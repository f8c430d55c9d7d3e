"""pygil against real CPython processes, checked against what the targets measure inside.

The target (tests/targets/gil_workload.py) runs threads after "go" and reports, per
thread, its wall time, time.thread_time() and the kernel's run delay (time runnable
but not on a CPU, /proc/thread-self/schedstat). A CPU-bound thread is off its CPU
either waiting for the GIL or waiting for a CPU: wall - cpu is its GIL wait plus at
most its run delay (the machine is shared by other test runs; on an idle one the
delay is near 0 and the bound is the plain "within 10% of wall - cpu").
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import (TARGETS, assert_fields_documented, assert_nothing_left, bpf_progs_of, run,
                      tool_path)

WORKLOAD = os.path.join(TARGETS, "gil_workload.py")
SPIN_LINES = [i + 1 for i, l in enumerate(open(WORKLOAD)) if "# SPIN_BODY" in l or "while not stop" in l]
SLEEP_LINE = [i + 1 for i, l in enumerate(open(WORKLOAD)) if "# SLEEP_LINE" in l][0]
RECV_LINE = [i + 1 for i, l in enumerate(open(WORKLOAD)) if "# RECV_LINE" in l][0]
SEND_LINE = [i + 1 for i, l in enumerate(open(WORKLOAD)) if "# SEND_LINE" in l][0]

# names in tests/targets/pythons.sh: builds with symbols (take_gil exists) and stripped ones
SYMBOL_BUILDS = ["pyenv-3.8", "pyenv-3.9", "pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13"]
STRIPPED_BUILDS = ["debian-3.11", "sid-3.13", "sid-3.14", "sid-3.15"]


@pytest.fixture(scope="module")
def pythons():
    out = subprocess.run(["sh", os.path.join(TARGETS, "pythons.sh")], capture_output=True,
                         text=True, timeout=600)
    found = {}
    for line in out.stdout.splitlines():
        name, _, cmd = line.partition("\t")
        found[name] = cmd.split()
    return found


def python_cmd(pythons, name):
    if name not in pythons:
        pytest.skip("%s is not available here (tests/targets/pythons.sh does not list it)" % name)
    return pythons[name]


class Workload:
    """gil_workload.py MODE SECONDS: "ready PID", then "go", then per-thread JSON lines and "done"."""

    def __init__(self, cmd, mode, seconds, prefix=()):
        self.proc = subprocess.Popen(list(prefix) + list(cmd) + [WORKLOAD, mode, str(seconds)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), "target did not start: %r" % line
        self.inner_pid = int(line.split()[1])
        self.pid = self.proc.pid
        if self.inner_pid != self.pid:  # under unshare --fork: the child of unshare
            for _ in range(50):
                with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
                    kids = f.read().split()
                if kids:
                    self.pid = int(kids[0])
                    break
                time.sleep(0.1)

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        threads = {}
        for line in self.proc.stdout:
            if line.strip() == "done":
                break
            r = json.loads(line)
            threads[r["name"]] = r
        else:
            raise AssertionError("target ended without done")
        self.proc.wait(timeout=30)
        return threads

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workloads():
    started = []

    def start(cmd, mode, seconds=2, prefix=()):
        w = Workload(cmd, mode, seconds, prefix)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


def trace(run_tool, loads, *args, json_mode=True):
    """pygil on every workload; each runs in turn. Returns the tool (stopped) and their threads."""
    tool = run_tool("pygil", *[a for w in loads for a in ("-p", str(w.pid))], *args,
                    json_mode=json_mode)
    results = [w.go() for w in loads]
    time.sleep(0.5)  # the last records reach the tool
    tool.stop()
    assert tool.returncode == 0, tool.stderr[-3000:]
    return tool, results


def waits_of(events, pid, native_id):
    return [e for e in events if e["pid"] == pid and e["container_tid"] == native_id]


def assert_wait_matches(name, thread, total_ms):
    """The thread's reported wait against wall - cpu (less at most its run delay), 10%."""
    truth = 1000 * (thread["wall"] - thread["cpu"])
    delay = 1000 * thread["run_delay"]
    assert truth > 300, "%s: %s hardly waited (%r): no contention to measure" % (name, thread["name"], thread)
    lo, hi = (truth - delay) * 0.9, truth * 1.1
    assert lo <= total_ms <= hi, "%s %s: reported %.0f ms of GIL wait, wall-cpu %.0f ms, run delay %.0f ms" % (
        name, thread["name"], total_ms, truth, delay)


def innermost(stack):
    return (stack or "").split(";")[-1]


def assert_other_waits_are_the_threads_own_io(evs, counted):
    """A thread's waits beside those the target counts: its start (no frames yet) and the
    GIL it lets go around its own I/O (the socket send, run_delay()'s file reads), a
    few of each; its loop shows in none of them."""
    others = [e for e in evs if e not in counted]
    own = ("run_delay (%s:" % WORKLOAD, "reader (%s:%d)" % (WORKLOAD, SEND_LINE))
    assert len(others) <= 10, others
    assert all(not e["waiter_py_stack"] or innermost(e["waiter_py_stack"]).startswith(own) for e in others), others


def iso_after(iso, seconds):
    """An ISO 8601 UTC time (as the tools print it) seconds later, in the same form."""
    import datetime
    if not iso:
        return iso
    t = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ") + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def in_spin(stack):
    """The innermost frame of a folded stack is spin() at its loop (or the Event.is_set it calls)."""
    frames = stack.split(";")
    for f in reversed(frames):
        m = re.match(r"(\S+) \((.*):(\d+)\)$", f)
        if m and m.group(1) == "spin":
            return m.group(2) == WORKLOAD and int(m.group(3)) in SPIN_LINES
        if not (m and m.group(1) == "Event.is_set" or f.startswith("is_set ")):
            return False
    return False


@pytest.mark.parametrize("hook,builds", [("futex", SYMBOL_BUILDS + STRIPPED_BUILDS),
                                         ("take_gil", SYMBOL_BUILDS), ("condvar", STRIPPED_BUILDS)])
def test_two_cpu_bound_threads_every_build(run_tool, pythons, workloads, hook, builds):
    """Each spinner's waits add up to its wall - cpu; the holder is the other one, in spin().
    The futex tracepoints are the default on every build; the uprobes (--hook) on
    take_gil where there are symbols, on libc's timed wait on the stripped builds."""
    avail = [n for n in builds if n in pythons]
    if len(avail) < 3:
        pytest.skip("fewer than 3 of the builds are here: %s" % sorted(pythons))
    loads = [workloads(pythons[n], "cpu2") for n in avail]
    tool, results = trace(run_tool, loads, "--min-wait-ms", "0", *([] if hook == "futex" else ["--hook", hook]))
    events = tool.events("gil_wait")
    assert_fields_documented("pygil", events)
    failures = []
    settled, ending = {}, {}
    for name, w, threads in zip(avail, loads, results):
        mine = [e for e in events if e["pid"] == w.pid]
        settled[w.pid] = iso_after(min((e["time"] for e in mine), default=""), 1.5)
        ending[w.pid] = iso_after(max((e["time"] for e in mine), default=""), -0.3)
        if {e["hook"] for e in mine} != {hook}:
            failures.append("%s: hooks %s, want %s" % (name, {e["hook"] for e in mine}, hook))
            continue
        for me, other in (("spinner-a", "spinner-b"), ("spinner-b", "spinner-a")):
            t, o = threads[me], threads[other]
            evs = waits_of(mine, w.pid, t["native_id"])
            try:
                assert_wait_matches(name, t, sum(e["duration_ms"] for e in evs))
            except AssertionError as e:
                failures.append(str(e))
            # the holder of (nearly) every wait is the other spinner, seen in spin(); the
            # main thread holds it too while it starts the threads and when they end
            long_ones = [e for e in evs if e["duration_ms"] >= 1]
            by_main = [e for e in long_ones if e["holder_container_tid"] == w.inner_pid]
            if len(by_main) > 5 + 0.1 * len(long_ones):
                failures.append("%s %s: %d of %d waits held by the main thread" % (
                    name, me, len(by_main), len(long_ones)))
            long_ones = [e for e in long_ones if e not in by_main]
            # a thread state pygil has not listed yet is null (rereads: every 20 ms at most),
            # and so is one freed at the end (the other spinner exited)
            unknown = [e for e in long_ones if e["holder_tid"] is None]
            if [e for e in unknown if settled[w.pid] <= e["time"] < ending[w.pid]] or \
                    len(unknown) > 0.1 * len(long_ones):
                failures.append("%s %s: %d of %d holders unknown" % (name, me, len(unknown), len(long_ones)))
            long_ones = [e for e in long_ones if e not in unknown]
            right = [e for e in long_ones if e["holder_container_tid"] == o["native_id"] and
                     e["holder_tid"] == o["native_id"] and in_spin(e["holder_py_stack"] or "")]
            # names come from threading's registry, reread every second while a thread has none
            # (and threading forgets a thread's name as it ends)
            named = [e for e in long_ones if settled[w.pid] <= e["time"] < ending[w.pid]]
            misnamed = [e for e in named if (e["thread_name"], e["holder_thread_name"]) != (me, other)]
            if misnamed:
                failures.append("%s %s: misnamed %s" % (name, me, misnamed[:1]))
            # (at its end a thread holds the GIL without frames, exiting)
            if len(long_ones) < 10 or len(right) < 0.9 * len(long_ones):
                bad = [e for e in long_ones if e not in right][:1]
                failures.append("%s %s: %d of %d waits held by %s in spin(): %s" % (
                    name, me, len(right), len(long_ones), other, bad))
            waiter_ok = [e for e in long_ones if in_spin(e["waiter_py_stack"] or "")]
            if len(waiter_ok) < 0.9 * len(long_ones):
                failures.append("%s %s: waiter stack not in spin() in %d of %d" % (
                    name, me, len(long_ones) - len(waiter_ok), len(long_ones)))
    assert not failures, "\n".join(failures)
    assert tool.summary()["lost"] == 0


@pytest.mark.parametrize("name", ["pyenv-3.12", "debian-3.11"])
def test_sleeper_waits_after_each_sleep_for_the_spinner(run_tool, pythons, workloads, name):
    cmd = python_cmd(pythons, name)
    sleepy, alone = workloads(cmd, "sleeper", 3), workloads(cmd, "one", 2)
    tool, (threads, _) = trace(run_tool, [sleepy, alone])
    events = tool.events("gil_wait")
    assert not [e for e in events if e["pid"] == alone.pid], "a one-thread program has nobody to wait for"
    s, a = threads["sleeper"], threads["spinner-a"]
    evs = waits_of(events, sleepy.pid, s["native_id"])
    want = "sleeper (%s:%d)" % (WORKLOAD, SLEEP_LINE)
    after_sleep = [e for e in evs if innermost(e["waiter_py_stack"]) == want]
    # each return from time.sleep finds the spinner holding the GIL: up to a switch interval
    assert 0.8 * s["loops"] <= len(after_sleep) <= s["loops"] + 2, (len(after_sleep), s)
    assert_other_waits_are_the_threads_own_io(evs, after_sleep)
    held = [e for e in evs if e["holder_container_tid"] == a["native_id"] and in_spin(e["holder_py_stack"])]
    assert len(held) >= 0.95 * len(evs), [e for e in evs if e not in held][:2]
    # waits of the default 1 ms or more, and no more than it was off-CPU beyond its sleeps
    assert all(e["duration_ms"] >= 1 for e in evs)
    off_cpu_ms = 1000 * (s["wall"] - s["cpu"] - 0.01 * s["loops"])
    assert sum(e["duration_ms"] for e in evs) <= 1.1 * off_cpu_ms, (off_cpu_ms, s)


def test_waits_on_each_recv_return(run_tool, pythons, workloads):
    cmd = python_cmd(pythons, "pyenv-3.11")
    w = workloads(cmd, "recv", 3)
    tool, (threads,) = trace(run_tool, [w], "--min-wait-ms", "0")
    r = threads["reader"]
    evs = waits_of(tool.events("gil_wait"), w.pid, r["native_id"])
    want = "reader (%s:%d)" % (WORKLOAD, RECV_LINE)
    after_recv = [e for e in evs if innermost(e["waiter_py_stack"]) == want]
    assert r["loops"] > 40
    # one more wait at the same line, with no recv return: the reader preempted by the
    # kernel while it holds the GIL for a switch interval (5 ms) is asked by spinner-a
    # to drop it, and drops it between bytecodes of that line. Each such wait needs
    # about 5 ms of the reader's run delay, so a loaded host may add delay / 5 ms.
    forced = 1000 * r["run_delay"] / 5
    slack = 0.02 * r["loops"] + 1
    assert r["loops"] - slack <= len(after_recv) <= r["loops"] + slack + forced, (
        len(after_recv), r, [(e["time"], e["duration_ms"]) for e in after_recv])
    assert_other_waits_are_the_threads_own_io(evs, after_recv)


def test_the_three_hooks_report_the_same_waits(run_tool, pythons, workloads):
    """The futex tracepoints, take_gil uprobes and the condition-variable uprobes on the
    same pyenv build at once: per thread, the same wait time (5%) and count (5%)."""
    cmd = python_cmd(pythons, "pyenv-3.12")
    w = workloads(cmd, "cpu2", 3)
    hooks = ("futex", "take_gil", "condvar")
    tools = [run_tool("pygil", "-p", str(w.pid), "--hook", h, "--no-stacks", "--min-wait-ms", "0") for h in hooks]
    threads = w.go()
    time.sleep(0.5)
    for t in tools:
        t.stop()
    for hook, t in zip(hooks, tools):
        assert {e["hook"] for e in t.events("gil_wait")} == {hook}
    for name in ("spinner-a", "spinner-b"):
        tid = threads[name]["native_id"]
        waits = [waits_of(t.events("gil_wait"), w.pid, tid) for t in tools]
        ms = [sum(e["duration_ms"] for e in evs) for evs in waits]
        n = [len(evs) for evs in waits]
        print(name, dict(zip(hooks, zip(ms, n))))
        assert ms[1] > 300 and all(abs(x - ms[1]) <= 0.05 * ms[1] for x in ms), (name, ms)
        assert all(abs(x - n[1]) <= 0.05 * n[1] + 2 for x in n), (name, n)


def test_per_thread_table_and_holder_stacks(run_tool, pythons, workloads):
    cmd = python_cmd(pythons, "debian-3.11")
    w = workloads(cmd, "cpu2", 3)
    tool, (threads,) = trace(run_tool, [w])
    rows = {r["tid"]: r for r in tool.events("gil_thread")}
    for name in ("spinner-a", "spinner-b"):
        t = threads[name]
        r = rows[t["native_id"]]
        assert r["thread_name"] == name and r["pid"] == w.pid
        assert_wait_matches("debian-3.11 table", t, r["wait_ms"])
        # holding: at least its CPU time, at most that and its run delay. In ms of the
        # tool's own wall time (wait_ms / wait_pct), sampled every 5 ms on average: a
        # share's standard error is at most 0.5/sqrt(samples); allowed: 3.5 of them
        wall_ms = r["wait_ms"] / (r["wait_pct"] / 100)
        hold_ms = wall_ms * r["hold_pct"] / 100
        slack = 3.5 * wall_ms * 0.5 / (wall_ms / 5) ** 0.5
        lo, hi = 1000 * t["cpu"], 1000 * (t["cpu"] + t["run_delay"])
        assert lo - slack <= hold_ms <= hi + slack, (name, hold_ms, slack, r, t)
        assert abs(r["hold_pct"] + r["wait_pct"] + r["neither_pct"] - 100) < 0.01
    stacks = tool.events("gil_holder_stack")
    assert stacks and in_spin(stacks[0]["holder_py_stack"])
    waited = sum(e["duration_ms"] for e in tool.events("gil_wait"))
    assert abs(sum(s["wait_ms"] for s in stacks) - waited) <= 0.01 * waited + 1 or len(stacks) == 10


def test_folded_holder_stacks(run_tool, pythons, workloads):
    cmd = python_cmd(pythons, "pyenv-3.13")
    w = workloads(cmd, "cpu2", 2)
    tool, (threads,) = trace(run_tool, [w], "-f", json_mode=False)
    lines = [l for l in tool.stdout.splitlines() if l.strip()]
    assert lines, tool.stderr[-2000:]
    total_us = torn_us = 0
    for l in lines:
        stack, _, n = l.rpartition(" ")
        total_us += int(n)
        assert stack, l
        # a holder that ran no Python frame (a spinner ending as the other waits) is named;
        # a holder's chain read while it ran can be cut short (pygil(8))
        if ";" not in stack and stack != "[no Python frames]":
            torn_us += int(n)
    assert torn_us <= 0.05 * total_us, lines
    spin_us = sum(int(l.rpartition(" ")[2]) for l in lines if in_spin(l.rpartition(" ")[0]))
    assert spin_us >= 0.95 * total_us
    truth = sum(1000 * (t["wall"] - t["cpu"]) for t in threads.values())
    delay = sum(1000 * t["run_delay"] for t in threads.values())
    assert (truth - delay) * 0.9 <= total_us / 1000 <= truth * 1.1, (total_us, truth, delay)


def test_a_holder_that_ends_has_no_frames(run_tool, pythons, workloads):
    """A thread that ends drops the GIL with no Python frame left: its waits are still
    counted, with an empty holder stack in the records, named in the folded stacks."""
    cmd = python_cmd(pythons, "pyenv-3.13")
    tool, (threads,) = trace(run_tool, [workloads(cmd, "churn", 2)])
    shorts = {t["native_id"] for n, t in threads.items() if n.startswith("short-")}
    assert len(shorts) > 10, threads.keys()
    frameless = [e for e in tool.events("gil_wait") if e["holder_py_stack"] == ""]
    assert frameless, "no wait ended as a short thread ended (%d of them)" % len(shorts)
    for e in frameless:
        assert e["holder_py_stack_depth"] == 0 and e["holder_tid"] in shorts, e
    tool, _ = trace(run_tool, [workloads(cmd, "churn", 2)], "-f", json_mode=False)
    lines = [l.rpartition(" ") for l in tool.stdout.splitlines() if l.strip()]
    assert all(stack and int(us) > 0 for stack, _, us in lines), lines
    assert "[no Python frames]" in [stack for stack, _, _ in lines], lines


def test_interval_tables_count_every_wait_once(run_tool, pythons, workloads):
    """-i 1 with every wait reported, on a thread that spins while short-lived ones
    start, wait and end one after another: per thread, the tables' waits over all
    intervals are its records, their time the records' time. Nothing a thread that
    ended had waited is lost, or counted again, as its state is freed."""
    cmd = python_cmd(pythons, "pyenv-3.12")
    tool, (threads,) = trace(run_tool, [workloads(cmd, "churn", 3)], "-i", "1", "--min-wait-ms", "0",
                             "--no-stacks")
    rows, waits = {}, {}
    for r in tool.events("gil_thread"):
        n, ms = rows.get(r["tid"], (0, 0))
        rows[r["tid"]] = (n + r["waits"], ms + r["wait_ms"])
    for e in tool.events("gil_wait"):
        n, ms = waits.get(e["tid"], (0, 0))
        waits[e["tid"]] = (n + 1, ms + e["duration_ms"])
    shorts = {t["native_id"] for n, t in threads.items() if n.startswith("short-")}
    spinner = threads["spinner-a"]["native_id"]
    assert len(shorts & set(rows)) > 10, rows
    assert len([r for r in tool.events("gil_thread") if r["tid"] == spinner]) >= 3  # the intervals
    rows = {tid: row for tid, row in rows.items() if row[0]}  # not the threads that only held it
    assert set(rows) == set(waits)
    for tid, (n, ms) in rows.items():
        assert n == waits[tid][0] and abs(ms - waits[tid][1]) <= 0.001 * n + 0.01, (tid, rows[tid], waits[tid])


def test_target_in_its_own_pid_namespace(run_tool, pythons, workloads):
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    cmd = python_cmd(pythons, "debian-3.11")
    w = workloads(cmd, "cpu2", 2, prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    assert w.inner_pid == 1 and w.pid != 1
    tool, (threads,) = trace(run_tool, [w])
    evs = tool.events("gil_wait")
    ids = {t["native_id"]: n for n, t in threads.items()}
    spinners = [e for e in evs if ids.get(e["container_tid"], "").startswith("spinner")]
    assert len(spinners) > 10
    for e in spinners:
        assert e["pid"] == w.pid and e["container_pid"] == 1 and e["tid"] != e["container_tid"]
        # the other spinner, or the main thread (container tid 1) starting them
        assert ids.get(e["holder_container_tid"], "").startswith("spinner") or e["holder_container_tid"] == 1, e
        assert e["holder_tid"] != e["holder_container_tid"]
    held = [e for e in spinners if ids.get(e["holder_container_tid"], "") not in ("", ids[e["container_tid"]])]
    assert len(held) >= 0.8 * len(spinners)


def test_targets_and_threads_that_share_a_slot(run_tool, pythons, workloads):
    """pygil finds a target and a waiting thread in an array slot by pid % 4096 and tid %
    8192 (bpf_text/pygil.h, pygil.bpf.c); two targets 4096 pids apart, each with spinners
    8192 tids apart, share theirs and are measured as well as any."""
    cmd = python_cmd(pythons, "debian-3.11")
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for attempt in range(3):  # another process may take a pid first
        first = workloads(["env", "GIL_WORKLOAD_TID_STEP=8192"] + cmd, "cpu2")
        second_pid = first.pid + 4096 if first.pid + 4096 < pid_max else first.pid - 4096
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(second_pid - 1))
        second = workloads(["env", "GIL_WORKLOAD_TID_STEP=8192"] + cmd, "cpu2")
        if second.pid == second_pid:
            break
        first.kill(), second.kill()
    else:
        pytest.fail("could not start two targets 4096 pids apart")
    tool, results = trace(run_tool, [first, second], "--min-wait-ms", "0")
    events = tool.events("gil_wait")
    for w, threads in zip((first, second), results):
        a, b = threads["spinner-a"], threads["spinner-b"]
        assert abs(a["native_id"] - b["native_id"]) == 8192, (a, b)
        for t in (a, b):
            evs = waits_of(events, w.pid, t["native_id"])
            assert_wait_matches("pid %d" % w.pid, t, sum(e["duration_ms"] for e in evs))
    assert tool.summary()["lost"] == 0 and tool.summary()["map_full"] == 0


def test_free_threaded_build_is_refused(pythons):
    """A 3.13 binary whose _Py_DebugOffsets say free-threaded: "no GIL", exit 1."""
    if "sid-3.13-ldso" not in pythons:
        pytest.skip("sid's 3.13 is not available here")
    loader, libflag, libdir, binary = pythons["sid-3.13-ldso"]
    sections = run(["readelf", "-SW", binary]).stdout
    m = re.search(r"\.PyRuntime\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)", sections)
    assert m, sections
    d = tempfile.mkdtemp(prefix="pygil-test-")
    copy = os.path.join(d, "python3.13")
    shutil.copy(binary, copy)
    with open(copy, "r+b") as f:  # _Py_DebugOffsets: cookie, version, free_threaded
        f.seek(int(m.group(1), 16))
        assert f.read(8) == b"xdebugpy"
        f.seek(int(m.group(1), 16) + 16)
        f.write((1).to_bytes(8, "little"))
    target = subprocess.Popen([loader, libflag, libdir, copy, "-c", "import time; time.sleep(60)"],
                              env=dict(os.environ, PYTHONHOME=os.path.dirname(os.path.dirname(binary))))
    try:
        time.sleep(0.5)
        assert target.poll() is None
        r = run([tool_path("pygil"), "-p", str(target.pid)], check=False, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "no GIL" in r.stderr and str(target.pid) in r.stderr, r.stderr
        assert r.stdout == ""
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_bad_input(pythons):
    target = subprocess.Popen(["sleep", "60"])
    try:
        r = run([tool_path("pygil"), "-p", str(target.pid)], check=False, timeout=60)
        assert r.returncode == 1 and "no CPython found in pid %d" % target.pid in r.stderr, r.stderr
    finally:
        target.kill()
        target.wait()
    for args, why in ((["--hook", "spinlock", "-p", "1"], "--hook"), ([], "-p PID"),
                      (["-p", "1", "-f", "-j"], "exclude"), (["-p", "1", "--min-wait-ms", "x"], "min-wait-ms"),
                      (["-p", "1", "--no-stacks", "-f"], "-f needs")):
        r = run([tool_path("pygil")] + args, check=False)
        assert r.returncode == 2 and why in r.stderr, (args, r.stderr)
    if "debian-3.11" in pythons:
        target = subprocess.Popen(pythons["debian-3.11"] + ["-c", "import time; time.sleep(60)"])
        try:
            time.sleep(0.3)
            r = run([tool_path("pygil"), "-p", str(target.pid), "--hook", "take_gil"], check=False, timeout=60)
            assert r.returncode == 1 and "no take_gil symbol" in r.stderr, r.stderr
        finally:
            target.kill()
            target.wait()


def test_nothing_left_after_exit(run_tool, pythons, workloads):
    w = workloads(python_cmd(pythons, "debian-3.11"), "cpu2", 1)
    tool = run_tool("pygil", "-p", str(w.pid))
    progs = bpf_progs_of(tool.proc.pid)
    assert progs
    w.go()
    # the only target exited: pygil says so and ends by itself
    deadline = time.time() + 20
    while tool.proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    tool.stop()
    assert tool.returncode == 0 and "pid %d exited" % w.pid in tool.stderr
    assert tool.summary()["events"] > 0
    assert_nothing_left(progs)


def test_children_started_later(run_tool, pythons):
    """--children: a child CPython started after pygil gets its waits traced too."""
    cmd = python_cmd(pythons, "debian-3.11")
    script = ("import subprocess, sys, time\n"
              "sys.stdin.readline()\n"
              "r = subprocess.run([sys.executable, %r, 'cpu2', '3'], input='go\\n', text=True,"
              " capture_output=True)\n"
              "print(r.stdout, end='', flush=True)\n") % WORKLOAD
    parent = subprocess.Popen(cmd + ["-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        tool = run_tool("pygil", "-p", str(parent.pid), "--children")
        out, _ = parent.communicate("start\n", timeout=60)  # the child starts after pygil
        time.sleep(0.5)
        tool.stop()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    child = int(out.split()[1])  # "ready PID"
    threads = {r["name"]: r for r in map(json.loads, [l for l in out.splitlines() if l.startswith("{")])}
    evs = [e for e in tool.events("gil_wait") if e["pid"] == child]
    spinners = {threads["spinner-a"]["native_id"], threads["spinner-b"]["native_id"]}
    mine = [e for e in evs if e["container_tid"] in spinners]
    assert len(mine) > 10, (len(evs), tool.stderr[-2000:])
    held = [e for e in mine if e["holder_tid"] in spinners - {e["tid"]} and in_spin(e["holder_py_stack"] or "")]
    assert len(held) >= 0.8 * len(mine)
