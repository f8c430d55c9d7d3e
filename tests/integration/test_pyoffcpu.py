"""pyoffcpu against real interpreters (every supported one tests/targets/pythons.sh
lists), with ground truths that do not come from the tool: the known length of a
time.sleep() and of a peer's late answer, the source lines of those calls, and the
kernel's own scheduler accounting in /proc/PID/task/TID/schedstat (on-CPU time,
run_delay, timeslices).
"""
import collections
import datetime
import os
import signal
import subprocess
import time

import pytest

from conftest import TARGETS, Tool, assert_fields_documented, run, tool_path
from test_pystack import Targets, parse_stack, pythons, supported, targets  # noqa: F401 (fixtures)

SCRIPT = os.path.join(TARGETS, "py_offcpu.py")


def marked_line(marker):
    with open(SCRIPT, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return i
    raise AssertionError("no %s line in %s" % (marker, SCRIPT))


def by_thread(events, name):
    out = {}
    for e in events:
        if e["thread_name"] == name:
            out.setdefault(e["pid"], []).append(e)
    return out


def start_all(targets, pythons, *args):
    """{name: process} of the target script on every supported interpreter."""
    return {name: targets.start(cmd + [SCRIPT] + list(args)) for name, cmd in supported(pythons).items()}


def trace(run_tool, procs, seconds, *extra):
    pids = [a for p in procs for a in ("-p", str(p.pid))]
    t = run_tool("pyoffcpu", *(pids + list(extra)))
    time.sleep(seconds)
    return t.stop()


@pytest.fixture(scope="module")
def sleep_and_recv(pythons):
    """One pyoffcpu run (one compile) over the sleep and the recv target on every
    supported interpreter: (tool, {name: sleep process}, {name: recv process}).
    The 9 s window holds at least three whole 2 s sleeps, so the two that the tests ask
    for leave 2 s for targets that a loaded machine wakes late."""
    procs = Targets()
    tool = None
    try:
        sleeps = start_all(procs, pythons, "sleep", "2")
        recvs = start_all(procs, pythons, "recv", "1.5")
        pids = [a for p in list(sleeps.values()) + list(recvs.values()) for a in ("-p", str(p.pid))]
        tool = Tool("pyoffcpu", pids).wait_ready()
        start = time.time()
        time.sleep(9)
        tool.window = (start, time.time())
        tool.stop()
        yield tool, sleeps, recvs
    finally:
        if tool and tool.proc.poll() is None:
            tool.proc.kill()
            tool.proc.wait()
        procs.stop_all()


def schedstat(pid, tid):
    """(on-CPU ns, run_delay ns, timeslices) of a thread, as the scheduler counts them."""
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        return tuple(int(x) for x in f.read().split())


def check_python_stack(e, func, line, failures, name):
    frames = parse_stack(e["py_stack"])
    if e["py_status"] != "complete" or not frames or frames[-1] != (func, SCRIPT, line) \
            or e["py_stack_depth"] != len(frames):
        failures.append("%s: python stack %s %r" % (name, e["py_status"], e["py_stack"]))


def user_frame_ok(frame, func):
    """The innermost user frame is libc's func. In Debian sid's libc (the sid interpreters
    load their own) cancellable system calls go through an internal function that is not
    in .dynsym (the system call instruction of /proc/PID/syscall there has no name
    either): there the module must be right."""
    return frame.endswith(" [libc.so.6]") and (func in frame or frame.startswith("[unknown]"))


def epoch(iso):
    """A record's time (UTC, ISO 8601 with microseconds) in seconds since the epoch."""
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def check_native_stacks(e, kernel_ok, user_ok, failures, unwalked, name):
    """The record's kernel and user stacks pass their checks, or (either) is empty: one
    that lost its bucket of the stack table to another stack (a hash collision), which
    assert_few_collisions weighs."""
    for kind, ok in (("kernel", kernel_ok), ("user", user_ok)):
        frames = e[kind + "_stack"]
        if not frames:
            unwalked.append((kind, name, e["time"]))
        elif not ok(frames):
            failures.append("%s: %s stack %s" % (name, kind, frames))


def assert_few_collisions(summary, unwalked, checked):
    """Empty stacks: no more than the summary counts as not taken, and rare (all records
    of one thread with one stack share its fate, so a collision empties them all)."""
    for kind in ("kernel", "user"):
        n = len([u for u in unwalked if u[0] == kind])
        assert n <= summary[kind + "_stack_errors"], (kind, unwalked, summary)
    assert len(unwalked) <= 0.2 * checked, (unwalked, checked)


def window(tool):
    """The traced window in the UTC form of the records' time field."""
    return " to ".join(time.strftime("%H:%M:%S", time.gmtime(w)) + (".%03d" % (w % 1 * 1000)) for w in tool.window)


def test_sleep_2s_on_every_interpreter(sleep_and_recv):
    """time.sleep(2) in a thread named sleeper: 2000 ms +-2%, state S, the sleeping line,
    the sleep's path in the kernel and libc's sleeping function on the user stack:
    3.11+ sleep in clock_nanosleep, 3.8-3.10 in select."""
    t, procs, _ = sleep_and_recv
    assert t.returncode == 0, t.stderr
    events = t.events("off_cpu")
    sleeps = by_thread(events, "sleeper")
    line = marked_line("SLEEP")
    failures, unwalked = [], []
    for name, p in procs.items():
        got = sleeps.get(p.pid, [])
        if len(got) < 2:
            failures.append("%s: %d sleeps in %s; its records: %s" % (name, len(got), window(t), [
                (e["thread_name"], e["time"], e["duration_ms"]) for e in events if e["pid"] == p.pid]))
            continue
        for e in got:
            # until the wakeup: the sleep itself; the wait for a CPU after it follows the load
            if not 1960 <= e["off_cpu_ms"] <= 2040 or e["prev_state"] != "S":
                failures.append("%s: %s ms (%s until woken) in %s" % (name, e["duration_ms"], e["off_cpu_ms"], e["prev_state"]))
            if e["runq_ms"] is None:
                # only a sleep that began as the tool attached its programs may miss its wakeup
                if epoch(e["time"]) >= t.window[0]:
                    failures.append("%s: no wakeup seen: %s" % (name, e))
            elif abs(e["off_cpu_ms"] + e["runq_ms"] - e["duration_ms"]) > 0.01:
                failures.append("%s: off_cpu + runq != duration: %s" % (name, e))
            check_python_stack(e, "sleeper", line, failures, name)
            old = name.startswith("pyenv-3.") and int(name.split(".")[1]) <= 10
            kfunc, ufunc = ("do_select", "select") if old else ("do_nanosleep", "clock_nanosleep")
            check_native_stacks(e, lambda k: kfunc + " [kernel]" in k and k[0] == "__schedule [kernel]",
                                lambda u: user_frame_ok(u[0], ufunc), failures, unwalked, name)
    assert not failures, "\n".join(failures)
    assert_fields_documented("pyoffcpu", t.events())
    summary = t.summary()
    assert_few_collisions(summary, unwalked, sum(len(sleeps.get(p.pid, [])) for p in procs.values()))
    assert summary["lost"] == 0 and summary["dropped"] == 0 and summary["long"] == len(events), summary


def test_recv_waits_for_a_late_peer(sleep_and_recv):
    """recv on a TCP peer that answers 1.5 s later: ~1500 ms, with the recv path in the
    kernel (tcp_recvmsg), user (libc's recv) and Python (the RECV line) stacks."""
    t, _, procs = sleep_and_recv
    assert t.returncode == 0, t.stderr
    recvs = by_thread(t.events("off_cpu"), "receiver")
    line = marked_line("RECV")
    failures, unwalked = [], []
    for name, p in procs.items():
        got = recvs.get(p.pid, [])
        if len(got) < 2:
            failures.append("%s: %d waits in %s" % (name, len(got), window(t)))
            continue
        for e in got:
            # the answer comes 1.5 s later, plus the answerer's own wait for a CPU
            if not 1490 <= e["off_cpu_ms"] <= 1600 or e["prev_state"] != "S" or \
                    abs(e["off_cpu_ms"] + e["runq_ms"] - e["duration_ms"]) > 0.01:
                failures.append("%s: %s ms (%s until woken) in %s" % (name, e["duration_ms"], e["off_cpu_ms"], e["prev_state"]))
            check_python_stack(e, "receiver", line, failures, name)
            check_native_stacks(e, lambda k: "tcp_recvmsg [kernel]" in k, lambda u: user_frame_ok(u[0], "recv"),
                                failures, unwalked, name)
    assert not failures, "\n".join(failures)
    assert_few_collisions(t.summary(), unwalked, sum(len(recvs.get(p.pid, [])) for p in procs.values()))


def stopped(pid, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.005)
    raise AssertionError("pid %d did not stop" % pid)


def contended(run_tool, targets, *extra, json_mode=True):
    """A spinning Python thread and a CPU hog pinned to one CPU. The target is stopped
    (SIGSTOP) while the tool starts and again before it ends, so that the tool and
    schedstat see the same window. Returns (tool, pid, tid, wall ns, schedstat delta)."""
    cpu = str(max(os.sched_getaffinity(0)))
    p = targets.start(["taskset", "-c", cpu, "/usr/bin/python3.11", SCRIPT, "spin"])
    tid = int(p.first_line)
    hog = targets.start(["taskset", "-c", cpu, "/usr/bin/python3.11", "-c",
                         "print('ready', flush=True)\nwhile True: pass"])
    assert hog
    os.kill(p.pid, signal.SIGSTOP)
    stopped(p.pid)
    t = run_tool("pyoffcpu", "-p", str(p.pid), "--min-ms", "0", *extra, json_mode=json_mode)
    wall, deltas = run_window(p.pid, [tid])
    t.stop()
    assert t.returncode == 0, t.stderr
    return t, p.pid, tid, wall, deltas[tid]


def run_window(pid, tids, seconds=4):
    """Lets the stopped process pid run for seconds, then stops it again: (wall ns,
    {tid: schedstat delta})."""
    # schedstat does not move while the target is stopped; the wall clock does, so it is
    # read right at the signals (a wait for stopped() can take long on a busy machine)
    s0 = {tid: schedstat(pid, tid) for tid in tids}
    os.kill(pid, signal.SIGCONT)
    t0 = time.monotonic_ns()
    time.sleep(seconds)
    t1 = time.monotonic_ns()
    os.kill(pid, signal.SIGSTOP)
    stopped(pid)
    return t1 - t0, {tid: [b - a for a, b in zip(s0[tid], schedstat(pid, tid))] for tid in tids}


def test_run_queue_time_equals_schedstat_run_delay(run_tool, targets):
    t, pid, tid, wall, (oncpu, run_delay, slices) = contended(run_tool, targets)
    [row] = [r for r in t.events("off_cpu_thread") if r["tid"] == tid]
    print("runq %.1f ms, run_delay %.1f ms; periods %d, timeslices %d" % (
        row["runq_ms"], run_delay / 1e6, row["periods"], slices))
    # the two share one CPU: a good part of the window is spent waiting for it
    assert run_delay > 0.2 * wall, (run_delay, wall)
    assert abs(row["runq_ms"] * 1e6 - run_delay) <= 0.05 * run_delay, (row, run_delay)
    assert abs(row["periods"] - slices) <= max(3, 0.05 * slices), (row, slices)
    # every period is a record (--min-ms 0): their run-queue times add up to the same
    events = [e for e in t.events("off_cpu") if e["tid"] == tid]
    assert len(events) + row["lost"] == row["count"] == row["periods"], (len(events), row)
    assert abs(sum(e["runq_ms"] or 0 for e in events) * 1e6 - run_delay) <= 0.05 * run_delay
    assert row["thread_name"] == "spinner" and row["pid"] == pid
    preempted = [e for e in events if e["prev_state"] == "R"]
    assert len(preempted) > 0.5 * len(events)
    assert all(e["runq_ms"] == e["duration_ms"] for e in preempted)


def test_interval_tables_are_totals_so_far(run_tool, targets):
    """-i 1 without -f: the per-thread table every second, each the totals since the start,
    so they grow, and the last one is the run delay schedstat counted."""
    t, pid, tid, wall, (oncpu, run_delay, slices) = contended(run_tool, targets, "-i", "1")
    rows = [r for r in t.events("off_cpu_thread") if r["tid"] == tid]
    print("tables: runq %s ms; run_delay %.1f ms" % ([r["runq_ms"] for r in rows], run_delay / 1e6))
    assert len(rows) >= 4, rows  # every second of the 4 s window, and the end
    assert all(a["runq_ms"] <= b["runq_ms"] and a["periods"] <= b["periods"] for a, b in zip(rows, rows[1:]))
    assert rows[0]["runq_ms"] < 0.9 * rows[-1]["runq_ms"]
    assert abs(rows[-1]["runq_ms"] * 1e6 - run_delay) <= 0.05 * run_delay, (rows[-1], run_delay)


def test_folded_totals_are_wall_time_minus_on_cpu(run_tool, targets):
    t, pid, tid, wall, (oncpu, run_delay, slices) = contended(run_tool, targets, "-f", json_mode=False)
    total_us = 0
    for line in t.stdout.splitlines():
        stack, _, us = line.rpartition(" ")
        if stack.startswith("spinner;"):
            total_us += int(us)
            assert "spinner (%s:" % SCRIPT in stack, stack
    expected = wall - oncpu
    print("folded %.1f ms, wall - on-CPU %.1f ms" % (total_us / 1e3, expected / 1e6))
    assert expected > 0.2 * wall
    assert abs(total_us * 1000 - expected) <= 0.05 * expected, (total_us, expected, t.stdout[-2000:])


def test_state_no_py_and_py_min_ms(run_tool, targets):
    """--state D shows no sleep (state S) but still counts its periods; --no-py and
    --py-min-ms above the sleep leave py_stack empty and say why; the stacks stay."""
    p = targets.start(["/usr/bin/python3.11", SCRIPT, "sleep", "1"])
    t = trace(run_tool, [p], 3.5, "--state", "D")
    assert t.returncode == 0, t.stderr
    assert not [e for e in t.events("off_cpu") if e["thread_name"] == "sleeper"]
    [row] = [r for r in t.events("off_cpu_thread") if r["thread_name"] == "sleeper"]
    # (one full run, 2026-12-07, beside other work: periods 1, cause unknown; passed 3 of 3 alone)
    assert row["periods"] >= 2 and row["count"] == 0, (row, t.summary(), t.stderr[-2000:])
    for extra, status in ((["--no-py"], "off"), (["--py-min-ms", "1500"], "short")):
        t = trace(run_tool, [p], 3.5, *extra)
        got = [e for e in t.events("off_cpu") if e["thread_name"] == "sleeper"]
        assert len(got) >= 2, (extra, t.stderr)
        for e in got:
            assert e["py_stack"] == "" and e["py_stack_depth"] == 0 and e["py_status"] == status, e
            assert "do_nanosleep [kernel]" in e["kernel_stack"] and e["user_stack"], e


def test_a_process_that_is_not_python(run_tool, targets):
    """A shell waiting for its 1 s sleeps: kernel and user stacks, py_stack empty, said once."""
    p = targets.start(["sh", "-c", "echo ready; while :; do sleep 1; done"])
    t = trace(run_tool, [p], 4)
    assert t.returncode == 0, t.stderr
    assert t.stderr.count("pid %d is not a CPython" % p.pid) == 1, t.stderr
    mine = [e for e in t.events("off_cpu") if e["tid"] == p.pid]
    assert all(e["py_stack"] == "" and e["py_status"] == "not_python" for e in mine), mine
    # its waits for the children (other periods: a fork, a preemption on a busy machine)
    waits = [e for e in mine if "do_wait [kernel]" in e["kernel_stack"]]
    assert len(waits) >= 2, t.stdout[-2000:]
    for e in waits:
        # the child's 1 s, plus its fork, exec and exit (400 ms seen on a busy machine),
        # less what the shell ran after the fork before it waited (997 ms seen under load)
        assert 900 <= e["off_cpu_ms"] <= 2000, e
        assert e["user_stack"] and e["user_stack"][0].endswith(" [libc.so.6]"), e


def test_a_switch_storm_is_survived_and_every_loss_counted(run_tool, targets):
    """Threads handing tokens back and forth as fast as they can, every period a record
    (--min-ms 0): the tool keeps running, and each period is a record or a counted loss."""
    p = targets.start(["/usr/bin/python3.11", SCRIPT, "pingpong", "4"])
    t = run_tool("pyoffcpu", "-p", str(p.pid), "--min-ms", "0")
    s0 = sum(schedstat(p.pid, int(tid))[2] for tid in os.listdir("/proc/%d/task" % p.pid))
    time.sleep(5)
    s1 = sum(schedstat(p.pid, int(tid))[2] for tid in os.listdir("/proc/%d/task" % p.pid))
    t.stop()
    assert t.returncode == 0, t.stderr
    summary = t.summary()
    rows = t.events("off_cpu_thread")
    events = t.events("off_cpu")
    print("%.0f switches/s of the target; %d records, %d lost, %d dropped, tool CPU %.0f ms" % (
        (s1 - s0) / 5, len(events), summary["lost"], summary["dropped"], summary["tool_cpu_ms"]))
    assert s1 - s0 > 5 * 1000, "not much of a storm"
    assert summary["lost"] == sum(r["lost"] for r in rows)
    assert summary["long"] == sum(r["count"] for r in rows)
    assert len(events) + summary["lost"] + summary["dropped"] == summary["long"], summary
    assert summary["tool_cpu_ms"] > 0 and summary["untracked"] == 0


@pytest.mark.parametrize("args,code,message", [
    (["--state", "X", "-p", "1"], 2, "--state"),
    (["--max-stack-depth", "0", "-p", "1"], 2, "max-stack-depth"),
    (["--max-stack-depth", "128", "-p", "1"], 2, "max-stack-depth"),
    (["--min-ms", "-1", "-p", "1"], 2, "min-ms"),
    (["-i", "0", "-p", "1"], 2, "invalid --interval '0'"),
    (["-f", "-j", "-p", "1"], 2, "exclude"),
    ([], 2, "-p PID"),
    (["-p", "999999999"], 1, "no process with pid 999999999: skipped"),
])
def test_bad_input(args, code, message):
    r = run([tool_path("pyoffcpu")] + args, check=False)
    assert r.returncode == code, (args, r.returncode, r.stderr)
    assert r.stderr.startswith("pyoffcpu: ") and message in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_pid_that_does_not_exist():
    p = subprocess.Popen(["true"])
    p.wait()
    r = run([tool_path("pyoffcpu"), "-p", str(p.pid), "-d", "1"], check=False)
    # skipped with a warning (pytargets.h); nothing else to trace: a runtime failure
    assert r.returncode == 1 and "no process with pid %d: skipped" % p.pid in r.stderr, r.stderr
    assert "pyoffcpu: no -p pid is left to trace" in r.stderr


def test_in_a_pid_namespace(run_tool, targets):
    """A target that is pid 1 of its own PID namespace: host and namespace ids, and its stacks."""
    p = targets.start(["unshare", "--pid", "--fork", "--mount-proc", "/usr/bin/python3.11", SCRIPT,
                       "sleep", "1"])
    child = int(run(["pgrep", "-P", str(p.pid)]).stdout.split()[0])
    try:
        t = trace(run_tool, [type("P", (), {"pid": child})], 3.5)
    finally:
        os.kill(child, signal.SIGKILL)  # pid 1 of a namespace ignores SIGTERM
    got = by_thread(t.events("off_cpu"), "sleeper").get(child, [])
    assert len(got) >= 2, t.stdout[-2000:] + t.stderr[-2000:]
    for e in got:
        assert e["container_pid"] == 1 and e["tid"] != child and 1 < e["container_tid"] < 100, e
        check = []
        check_python_stack(e, "sleeper", marked_line("SLEEP"), check, "debian-3.11")
        assert not check and "do_nanosleep [kernel]" in e["kernel_stack"], (check, e)


def test_children_and_interval_folded(run_tool, targets):
    """--children: a shell's Python child is traced with its Python stacks; -f -i prints
    the folded stacks of each interval (counting afresh: no interval holds the whole run)."""
    p = targets.start(["sh", "-c", "echo ready; /usr/bin/python3.11 %s sleep 1 >/dev/null & wait" % SCRIPT])
    deadline = time.time() + 30
    kids = []
    while not kids and time.time() < deadline:
        kids = run(["pgrep", "-P", str(p.pid)], check=False).stdout.split()
        time.sleep(0.1)
    assert kids
    try:
        t = run_tool("pyoffcpu", "-p", str(p.pid), "--children", "-f", "-i", "2", json_mode=False)
        time.sleep(5)
        t.stop()
    finally:
        for k in kids:  # killing the shell leaves its child running
            try:
                os.kill(int(k), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert t.returncode == 0, t.stderr
    sleeps = [int(l.rpartition(" ")[2]) for l in t.stdout.splitlines()
              if l.startswith("sleeper;") and "sleeper (%s:%d)" % (SCRIPT, marked_line("SLEEP")) in l]
    assert len(sleeps) >= 2, t.stdout
    # each interval holds the 1 s sleeps that ended in it: one to three (an interval is a
    # little over 2 s, and three ends fit when one falls just after its start), never the
    # 4 to 5 s that a count over the whole run reaches by its second interval
    assert all(900000 <= us <= 3100000 for us in sleeps), sleeps


def test_threads_born_after_the_last_record_are_named(run_tool, targets):
    """A new thread every 150 ms, each sleeping 30 ms twice: every record of those sleeps
    carries its thread's Python name, the first of a thread too, though a record of the
    thread before it came a moment earlier. (A record read after its thread ended may
    have only the comm: the thread's last, 0.5 s sleep is not checked.)"""
    p = targets.start(["/usr/bin/python3.11", SCRIPT, "newthreads"])
    t = trace(run_tool, [p], 3, "--no-py")
    # a 30 ms sleep is off the CPU until the thread runs again: on a loaded host that
    # can be 100 ms and more (CI once lost one to a bound of 100 ms); 400 ms still
    # keeps out the 0.5 s sleep
    sleeps = [e for e in t.events("off_cpu") if e["pid"] == p.pid and e["tid"] != p.pid
              and e["duration_ms"] < 400]
    names = collections.Counter(e["thread_name"] for e in sleeps)
    assert [n for n in names if not n.startswith("new-")] == [], names
    # the first thread may have begun its sleeps before the tool, the last not ended them
    durations = sorted((e["thread_name"], e["duration_ms"]) for e in sleeps)
    assert len(names) >= 12 and len(sleeps) >= 2 * len(names) - 2, (durations, t.stderr[-2000:])


def test_the_run_ends_when_a_target_that_is_not_python_exits(run_tool, targets):
    p = targets.start(["sh", "-c", "echo ready; sleep 2"])
    t = run_tool("pyoffcpu", "-p", str(p.pid), "-d", "120")
    t.proc.wait(timeout=60)
    t.stop()
    assert t.returncode == 0 and "target pid %d exited" % p.pid in t.stderr, t.stderr
