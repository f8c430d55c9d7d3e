"""pygc against real CPython processes of every build here, checked against gc.callbacks.

The target (tests/targets/gc_workload.py) records each collection from inside, with
gc.callbacks: generation, start and stop (time.perf_counter_ns, CLOCK_MONOTONIC, the
clock of bpf_ktime_get_ns), and the gc.get_stats() deltas. pygc's events must match
those one to one.
"""
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import (ROOT, TARGETS, assert_fields_documented, assert_nothing_left, bpf_progs_of,
                      run, tool_path)

WORKLOAD = os.path.join(TARGETS, "gc_workload.py")

# (name in tests/targets/pythons.sh, the hook pygc must pick)
BUILDS = [
    ("pyenv-3.8", "uprobe"), ("pyenv-3.9", "uprobe"), ("pyenv-3.10", "uprobe"),
    ("pyenv-3.11", "uprobe"), ("pyenv-3.12", "uprobe"),
    ("pyenv-3.13", "uprobe_callbacks"),  # 3.13 runs the callbacks inside the collector
    ("debian-3.11", "usdt"),
    ("sid-3.13", "usdt"), ("sid-3.14", "usdt"), ("sid-3.15", "usdt"),
    ("sid-3.14-ldso", "usdt"),  # started by its own ld.so: /proc/PID/exe is the loader
]


@pytest.fixture(scope="session")
def pythons():
    """{name: command list} from tests/targets/pythons.sh (it fetches sid's once)."""
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


def pinning():
    """Target on CPU 0, pygc on CPU 1: the tool's wakeups then do not preempt the target
    (which would stretch the callback bracket by a scheduling delay, not by GC work)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or not shutil.which("taskset"):
        return [], []
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", str(cpus[1])]


class Workload:
    """gc_workload.py: prints "ready PID", waits for "go", collects, writes its records."""

    def __init__(self, cmd, prefix=()):
        self.dir = tempfile.mkdtemp(prefix="pygc-test-")
        self.out = os.path.join(self.dir, "records.txt")
        self.proc = subprocess.Popen(list(prefix) + list(cmd) + [WORKLOAD, self.out],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), "target did not start: %r" % line
        self.inner_pid = int(line.split()[1])  # its pid in its own PID namespace
        self.pid = self.proc.pid

    def go(self, timeout=120):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.strip() == "done", "target failed: %r" % line
        return self.records()

    def records(self):
        recs, stats = [], None
        with open(self.out) as f:
            for line in f:
                p = line.split()
                if p[0] == "stats":
                    stats = [int(x) for x in p[1:]]
                else:
                    gen, start, stop, collected, preempted = (int(x) for x in p)
                    recs.append({"gen": gen, "start": start, "stop": stop,
                                 "collected": collected, "preempted": preempted})
        return recs, stats

    def finish(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def inside(events, recs):
    """The events of the collections the callbacks saw (the heap set-up before is not),
    in time order: per-CPU buffers give a thread that moved between CPUs within one poll
    its records CPU by CPU (pyebpf(7), Perf buffers)."""
    lo, hi = recs[0]["start"], recs[-1]["stop"]
    return sorted((e for e in events if e["start_ns"] >= lo and e["end_ns"] <= hi), key=lambda e: e["start_ns"])


def check_against_callbacks(events, recs, stats):
    """One event per callback-recorded collection, same order, inside its bracket."""
    assert stats and len(recs) > 100
    evs = inside(events, recs)
    assert [e["generation"] for e in evs] == [r["gen"] for r in recs], \
        "generation sequences differ: %d events, %d callbacks" % (len(evs), len(recs))
    # gc.get_stats() counts every collection of each generation in the window
    for g in range(3):
        assert sum(1 for e in evs if e["generation"] == g) == stats[g], "generation %d" % g
    assert {0, 1, 2} <= {r["gen"] for r in recs}
    assert max(r["stop"] - r["start"] for r in recs if r["gen"] == 2) > 2e6, "no slow gen-2"
    far = []
    for e, r in zip(evs, recs):
        assert r["start"] <= e["start_ns"] <= e["end_ns"] <= r["stop"], (e, r)
        assert abs(e["duration_ms"] - (e["end_ns"] - e["start_ns"]) / 1e6) < 0.0011
        # the probes report collected + uncollectable, like the callback's info
        assert e["collected"] >= r["collected"], (e, r)
        cb_ms = (r["stop"] - r["start"]) / 1e6
        if r["preempted"] == 0 and cb_ms - e["duration_ms"] > max(0.1, 0.05 * cb_ms):
            far.append((round(cb_ms, 3), e["duration_ms"]))
    # Within 5% or 0.1 ms of the callback's own measurement, for every collection the
    # thread was not preempted in. The callbacks bracket a little more than the
    # collection: CPython's work between the "start" callback and gc__start (and the
    # collector's entry), and from gc__done to the "stop" callback (measured on Debian
    # 3.11-3.15: a median of 12-22 us, up to ~1.4 ms), plus interrupts and hypervisor
    # steal, which nivcsw does not count. On this 2-core machine shared with other
    # builds these push about 1% of the pauses past 0.1 ms, and in a busy second up to
    # 6% (seen: 12 of 198 on pyenv 3.13, pauses of 0.15 ms in brackets of 0.26-0.58 ms);
    # allowed: at most 10%, and a small median, which a pause measured short throughout
    # would fail.
    assert len(far) <= max(1, len(recs) // 10), "%d of %d pauses far from the callbacks: %s" % (
        len(far), len(recs), far[:10])
    diffs = sorted((r["stop"] - r["start"]) / 1e6 - e["duration_ms"] for e, r in zip(evs, recs))
    assert diffs[len(diffs) // 2] < 0.05, "median bracket-minus-pause %.3f ms" % diffs[len(diffs) // 2]
    return evs


def nearest_rank(values, p):
    """The exact nearest-rank percentile."""
    v = sorted(values)
    return v[max(1, math.ceil(p / 100.0 * len(v))) - 1]


def assert_percentile(reported_ms, values_ms, p):
    """A summary percentile against the exact one of the printed pauses: within the
    histogram's stated resolution (pygc(8): 1.6%), plus the 1 us both are printed to."""
    exact = nearest_rank(values_ms, p)
    assert abs(reported_ms - exact) <= 0.016 * exact + 0.0011, (p, reported_ms, exact)


def trace_workload(run_tool, cmd, extra=(), prefix=()):
    t_pin, p_pin = pinning()
    w = Workload(cmd, prefix=list(prefix) + t_pin)
    try:
        pid = host_pid_of(w)
        tool = start_pygc(run_tool, p_pin, "-p", str(pid), *extra)
        progs = bpf_progs_of(tool.proc.pid)
        assert progs
        recs, stats = w.go()
        time.sleep(0.3)
        tool.stop()
        assert tool.returncode == 0, tool.stderr
        assert_nothing_left(progs)
        return tool, recs, stats, w
    finally:
        w.finish()


def start_pygc(run_tool, pin, *args):
    tool = run_tool("pygc", *args)
    if pin:  # ready: compiled and attached; from now on it only reads its buffers
        os.sched_setaffinity(tool.proc.pid, {int(pin[-1])})
    return tool


def host_pid_of(w):
    """The python's host pid (under unshare --fork it is the child of unshare)."""
    if w.inner_pid == w.pid:
        return w.pid
    for _ in range(50):
        with open("/proc/%d/task/%d/children" % (w.pid, w.pid)) as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.1)
    raise AssertionError("no child of %d" % w.pid)


@pytest.mark.parametrize("name,hook", BUILDS, ids=[b[0] for b in BUILDS])
def test_every_collection_once_per_build(run_tool, pythons, name, hook):
    tool, recs, stats, _ = trace_workload(run_tool, python_cmd(pythons, name))
    evs = check_against_callbacks(tool.events("gc_pause"), recs, stats)
    assert {e["hook"] for e in evs} == {hook}
    assert all(e["comm"].startswith("python") or e["comm"] == "ld-linux-x86-64" for e in evs)
    # outside a PID namespace the container ids are the host ids
    assert all(e["container_pid"] == e["pid"] and e["container_tid"] == e["tid"] for e in evs)
    assert_fields_documented("pygc", tool.events("gc_pause"), optional=("env", "stack", "task", "task_coro"))
    # the per-generation summary counts what was printed
    sums = {s["generation"]: s for s in tool.events("gc_summary")}
    for g in range(3):
        mine = [e["duration_ms"] for e in tool.events("gc_pause") if e["generation"] == g]
        assert sums[g]["count"] == len(mine)
        if mine:
            assert sums[g]["max_ms"] == max(mine)
            assert_percentile(sums[g]["p50_ms"], mine, 50)
            assert_percentile(sums[g]["p99_ms"], mine, 99)
    assert "generation 2: " in tool.stderr and "p99_ms=" in tool.stderr


def test_generation_filter_and_min_ms(run_tool, pythons):
    cmd = python_cmd(pythons, "debian-3.11")
    tool, recs, stats, _ = trace_workload(run_tool, cmd, extra=("-g", "2"))
    evs = inside(tool.events("gc_pause"), recs)
    assert [e["generation"] for e in evs] == [2] * stats[2]

    tool, recs, stats, _ = trace_workload(run_tool, cmd, extra=("--min-ms", "2"))
    evs = inside(tool.events("gc_pause"), recs)
    assert evs and all(e["duration_ms"] >= 2 for e in evs)
    # every collection whose callback bracket is clearly shorter is absent, every clearly longer one present
    slow = [r for r in recs if (r["stop"] - r["start"]) / 1e6 > 2.5 and r["preempted"] == 0]
    fast = [r for r in recs if (r["stop"] - r["start"]) / 1e6 < 2]
    for r in slow:
        assert any(r["start"] <= e["start_ns"] and e["end_ns"] <= r["stop"] for e in evs), r
    for r in fast:
        assert not any(r["start"] <= e["start_ns"] and e["end_ns"] <= r["stop"] for e in evs), r


def test_target_in_its_own_pid_namespace(run_tool, pythons):
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    cmd = python_cmd(pythons, "debian-3.11")
    tool, recs, stats, w = trace_workload(
        run_tool, cmd, prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    assert w.inner_pid == 1
    evs = check_against_callbacks(tool.events("gc_pause"), recs, stats)
    assert {(e["container_pid"], e["container_tid"]) for e in evs} == {(1, 1)}
    assert all(e["pid"] != 1 for e in evs)


def semaphores(pid, binary):
    """Values of the gc__start/gc__done USDT semaphores in pid (non-PIE binary: note addresses)."""
    notes = run(["readelf", "-n", binary]).stdout
    addrs = [int(a, 16) for a in re.findall(r"Name: gc__(?:start|done)\n.*Semaphore: (0x[0-9a-f]+)", notes)]
    assert len(addrs) == 2
    vals = []
    with open("/proc/%d/mem" % pid, "rb") as f:
        for a in addrs:
            f.seek(a)
            vals.append(int.from_bytes(f.read(2), "little"))
    return vals


def test_semaphores_raised_while_tracing_and_lowered_after_kill_9(run_tool, pythons):
    binary = "/usr/bin/python3.11"
    if not os.path.exists(binary):
        pytest.skip("Debian's python3.11 is not installed")
    target = subprocess.Popen([binary, "-c", "import time; time.sleep(120)"])
    try:
        time.sleep(0.3)
        assert semaphores(target.pid, binary) == [0, 0]
        tool = run_tool("pygc", "-p", str(target.pid))
        assert semaphores(target.pid, binary) == [1, 1]
        progs = bpf_progs_of(tool.proc.pid)
        tool.proc.kill()  # SIGKILL: no clean-up code runs
        tool.proc.wait()
        assert_nothing_left(progs)
        assert semaphores(target.pid, binary) == [0, 0]
    finally:
        target.kill()
        target.wait()


def test_target_without_usdt_and_symbols_is_refused(pythons):
    binary = "/usr/bin/python3.11"
    if not os.path.exists(binary):
        pytest.skip("Debian's python3.11 is not installed")
    d = tempfile.mkdtemp(prefix="pygc-test-")
    copy = os.path.join(d, "python3.11-nousdt")
    run(["objcopy", "--remove-section=.note.stapsdt", binary, copy])
    target = subprocess.Popen([copy, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        r = run([tool_path("pygc"), "-p", str(target.pid)], check=False, timeout=60)
        assert r.returncode == 1
        assert "no USDT gc probes" in r.stderr and "cannot be traced" in r.stderr, r.stderr
        assert str(target.pid) in r.stderr
        assert r.stdout == ""
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(d, ignore_errors=True)


def test_non_python_pid_is_refused():
    target = subprocess.Popen(["sleep", "60"])
    try:
        r = run([tool_path("pygc"), "-p", str(target.pid)], check=False, timeout=60)
        assert r.returncode == 1
        assert "no CPython found in pid %d" % target.pid in r.stderr, r.stderr
        assert r.stdout == ""
    finally:
        target.kill()
        target.wait()
    r = run([tool_path("pygc"), "-g", "3"], check=False)
    assert r.returncode == 2 and "generation" in r.stderr


def test_target_exiting_mid_run(run_tool, pythons):
    """The only target exits: pygc reports it, prints its collections and the summary, exits 0."""
    cmd = python_cmd(pythons, "debian-3.11")
    code = ("import gc, sys, time\n"
            "n = []\n"
            "gc.callbacks.append(lambda p, i: p == 'stop' and n.append(i['generation']))\n"
            "sys.stdin.readline()\n"
            "for g in (0, 1, 2, 0, 1, 2, 2):\n"
            "    gc.collect(g)\n"
            "print(len(n), flush=True)\n")
    target = subprocess.Popen(cmd + ["-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    tool = run_tool("pygc", "-p", str(target.pid))
    progs = bpf_progs_of(tool.proc.pid)
    target.stdin.write("go\n")
    target.stdin.flush()
    seen = int(target.stdout.readline())
    target.wait(timeout=30)
    try:
        tool.proc.wait(timeout=30)  # no signal: it must end by itself
    except subprocess.TimeoutExpired:
        pytest.fail("pygc did not exit after its only target did")
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    assert "pid %d exited" % target.pid in tool.stderr
    gens = [e["generation"] for e in tool.events("gc_pause")]
    # the explicit collections, in order, among the automatic ones
    it = iter(gens)
    assert all(g in it for g in (0, 1, 2, 0, 1, 2, 2)), gens
    # every collection the callbacks saw, plus interpreter shutdown's (which run none)
    assert len(gens) > seen >= 7
    assert_nothing_left(progs)


@pytest.mark.parametrize("name", ["debian-3.11", "pyenv-3.8", "pyenv-3.13", "sid-3.14"])
def test_stack_names_the_code_that_collected(run_tool, pythons, name):
    """--stack: the innermost frame of each explicit collection is gc.collect's caller."""
    cmd = python_cmd(pythons, name)
    target = subprocess.Popen(cmd + [os.path.join(TARGETS, "gc_stack.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(target.pid), "--stack", "-g", "1")
        target.stdin.write("go\n")
        target.stdin.flush()
        _, path, line = target.stdout.readline().split()
        time.sleep(0.3)
        tool.stop()
    finally:
        target.kill()
        target.wait()
    assert tool.returncode == 0, tool.stderr
    evs = [e for e in tool.events("gc_pause") if e["thread_name"] == "gc-caller"]
    assert len(evs) == 5, tool.stdout
    for e in evs:
        assert e["stack"][-1] == "collect_here (%s:%s)" % (path, line), e["stack"]
        assert e["stack"][-2].startswith("caller (%s:" % path), e["stack"]
        assert not e["stack"][0].startswith("[")  # complete: the thread's first frame
    assert_fields_documented("pygc", tool.events("gc_pause"), optional=("env", "stack", "task", "task_coro"))


def test_system_wide_includes_processes_started_later(run_tool, pythons):
    """Without -p: a pyenv interpreter running at start (uprobes on its libpython, for
    every process) and Debian's python3.11 started after pygc is ready (its USDT
    semaphores raised by the kernel in the new process) are both traced exactly."""
    early_cmd, late_cmd = python_cmd(pythons, "pyenv-3.12"), python_cmd(pythons, "debian-3.11")
    t_pin, p_pin = pinning()
    early = Workload(early_cmd, prefix=t_pin)
    late = None
    try:
        tool = start_pygc(run_tool, p_pin)
        banner = tool._early_stderr.decode()
        assert "/usr/bin/python3.11: USDT python:gc__start/gc__done" in banner, banner
        late = Workload(late_cmd, prefix=t_pin)
        results = [(early, early.go()), (late, late.go())]
        time.sleep(0.3)
        tool.stop()
        assert tool.returncode == 0, tool.stderr
        for w, (recs, stats) in results:
            evs = [e for e in tool.events("gc_pause") if e["pid"] == w.pid]
            check_against_callbacks(evs, recs, stats)
    finally:
        early.finish()
        if late:
            late.finish()


@pytest.mark.parametrize("name", ["pyenv-3.13", "sid-3.13"])
def test_collector_calls_that_collect_nothing_are_no_pauses(run_tool, pythons, name):
    """3.13's automatic collector is entered with generation -1 ("pick one") and may
    return without collecting anything: no callback runs, so no gc_pause either. The
    json.loads calls that fail with RecursionError make 50 such calls; every pause
    printed must be one of the collections the gc.callbacks saw, and the summary's
    events must be the per-generation counts added up."""
    target = subprocess.Popen(python_cmd(pythons, name) + [os.path.join(TARGETS, "gc_nothing_due.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(target.pid))
        target.stdin.write("go\n")
        target.stdin.flush()
        line = target.stdout.readline().split()
        assert line and line[0] == "done", line
        recs = [tuple(int(x) for x in r.split(":")) for r in line[1:]]
        time.sleep(0.3)
        tool.stop()
    finally:
        target.kill()
        target.wait()
    assert tool.returncode == 0, tool.stderr
    pauses = tool.events("gc_pause")
    assert len(recs) >= 23 and {0} <= {r[0] for r in recs}
    lo, hi = recs[0][1], recs[-1][2]
    window = [e for e in pauses if e["end_ns"] >= lo and e["start_ns"] <= hi]
    assert [e["generation"] for e in window] == [r[0] for r in recs], (len(window), len(recs))
    assert all(0 <= e["generation"] <= 2 for e in pauses), [e for e in pauses if e["generation"] < 0][:3]
    # the target never imports threading: its main thread is still MainThread, as pystack says
    assert pauses and {e["thread_name"] for e in pauses} == {"MainThread"}
    s = tool.summary()
    counts = {g["generation"]: g["count"] for g in tool.events("gc_summary")}
    assert s["events"] == len(pauses) == sum(counts.values())
    if all(e["hook"] != "usdt" for e in pauses):
        # the uprobe on the collector saw the calls (USDT fires only once a generation is chosen)
        assert s["nothing_due"] >= 50, s


def test_target_that_exits_during_the_compile(pythons):
    """pygc plans its hooks from the target, then compiles for a second or more; a
    target killed then is said to have exited, and the run ends as when the only
    target exits mid-trace: summary, status 0 (not "attaching uprobe failed")."""
    cmd = python_cmd(pythons, "debian-3.11")
    target = subprocess.Popen(cmd + ["-c", "import time; time.sleep(600)"])
    tool = subprocess.Popen([tool_path("pygc"), "-j", "-p", str(target.pid)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        while "pid %d: CPython" % target.pid not in seen:  # planned: the compile starts now
            line = tool.stderr.readline()
            assert line, seen
            seen += line
        target.kill()
        target.wait()
        out, err = tool.communicate(timeout=120)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
        if target.poll() is None:
            target.kill()
            target.wait()
    assert tool.returncode == 0, err
    assert "target pid %d exited before its probes were attached" % target.pid in err, err
    assert "failed" not in err
    assert '"metric":"pygc_summary"' in out
