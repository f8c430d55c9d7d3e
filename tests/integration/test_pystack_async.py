"""pystack's asyncio task views against ground truths that do not come from pystack: the
target's own time.thread_time split per task, the lines of its await statements, the
tree CPython's own `python3.X -m asyncio pstree PID` prints (3.14, 3.15) of a target
paused with SIGSTOP, and a target creating and finishing tasks at about 5,000 a second.

Targets: tests/targets/py_tasks.py on every 3.11+ interpreter pythons.sh lists (and
uvloop on Debian's 3.11 when python3-uvloop is installed).
"""
import ast
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import TARGETS, assert_fields_documented, run, tool_path
from test_pystack import Targets, iso_time, parse_stack, pystack, pythons, supported  # noqa: F401

SCRIPT = os.path.join(TARGETS, "py_tasks.py")


@pytest.fixture
def targets():
    t = Targets()
    yield t
    t.stop_all()


def asyncio_pythons(pythons):  # noqa: F811
    """The supported interpreters with asyncio task support (3.11+)."""
    out = {}
    for name, cmd in supported(pythons).items():
        m = re.search(r"3\.(\d+)", name)
        if m and int(m.group(1)) >= 11:
            out[name] = cmd
    return out


def has_uvloop():
    return subprocess.run(["/usr/bin/python3.11", "-c", "import uvloop"], capture_output=True).returncode == 0


def run_pystack(pystack, pids, seconds, *extra):  # noqa: F811
    t = pystack(pids, *extra)
    time.sleep(seconds)
    t.stop()
    return t


def events(t, metric):
    return [e for e in t.events() if e.get("metric") == metric]


def stop_truth(p):
    """SIGTERM: the target prints its ground truth as its last line."""
    p.send_signal(signal.SIGTERM)
    out = p.stdout.read().decode().strip().splitlines()
    p.wait(timeout=30)
    return json.loads(out[-1])


def test_task_of_cpu_samples_60_40(pystack, targets, pythons):  # noqa: F811
    """task in py_stack: cpu-a/cpu-b share as measured inside the target (3 points)."""
    pys = asyncio_pythons(pythons)
    procs = {name: targets.start(cmd + [SCRIPT, "split"]) for name, cmd in pys.items()}
    # enough samples per target for 3 points (the interpreters share 2 CPUs)
    t = pystack([p.pid for p in procs.values()], "-F", "999")
    for p in procs.values():
        p.send_signal(signal.SIGUSR1)  # the measurement restarts with the sampling
    time.sleep(10)
    truths = {name: stop_truth(p) for name, p in procs.items()}
    t.stop()
    samples = events(t, "py_stack")
    failures = []
    for name, p in procs.items():
        mine = [e for e in samples if e["pid"] == p.pid]
        named = [e for e in mine if e["task"] in ("cpu-a", "cpu-b")]
        if len(named) < 50:
            failures.append("%s: %d task samples" % (name, len(named)))
            continue
        share = 100.0 * sum(e["task"] == "cpu-a" for e in named) / len(named)
        truth = truths[name]
        want = 100.0 * truth["cpu-a"] / (truth["cpu-a"] + truth["cpu-b"])
        if abs(share - want) > 3:
            failures.append("%s: cpu-a %.1f%% of the task samples, the target measured %.1f%%"
                            % (name, share, want))
        # the task's samples are in the task's coroutine; the others are marked outside any task
        for e in mine:
            if e["task"] in ("cpu-a", "cpu-b"):
                if e["task_coro"] != "burn" or "burn (" not in e["stack"]:
                    failures.append("%s: task %s with coro %s: %s" % (name, e["task"], e["task_coro"], e["stack"]))
                    break
            elif "burn (" in e["stack"] or bool(e["task"]) != bool(e["task_coro"]):
                failures.append("%s: a sample in burn without its task: %s" % (name, e["stack"]))
                break
    assert not failures, failures


def test_tasks_ended_before_the_read_are_named(pystack, targets, pythons):  # noqa: F811
    """task in py_stack of tasks that live 4 ms and are gone long before pystack reads
    their samples: every sample in short_burn names its task, the one whose span (as the
    target timed it) holds the sample's time."""
    pys = asyncio_pythons(pythons)
    procs = {name: targets.start(cmd + [SCRIPT, "short"]) for name, cmd in pys.items()}
    t = pystack([p.pid for p in procs.values()], "-F", "499")
    time.sleep(6)
    truths = {name: stop_truth(p) for name, p in procs.items()}
    t.stop()
    samples = events(t, "py_stack")
    failures = []
    for name, p in procs.items():
        runs = truths[name]["short"]
        mine = [e for e in samples if e["pid"] == p.pid and "short_burn (" in e["stack"]]
        if len(mine) < 30 or len(runs) < 100:
            failures.append("%s: %d samples in short_burn, %d tasks" % (name, len(mine), len(runs)))
            continue
        for e in mine:
            when = iso_time(e["time"])
            near = {task for task, w0, w1 in runs if w0 - 0.002 <= when <= w1 + 0.002}
            if "short_tasks (" in e["stack"]:
                near = {"driver"}  # the driver calling short_burn() makes its coroutine
            if e["task"] not in near or e["task_coro"] != ("short_tasks" if near == {"driver"} else "short_burn"):
                failures.append("%s: sample at %.4f named %r (%r), the tasks then: %s" % (
                    name, when, e["task"], e["task_coro"], sorted(near)))
                break
    assert not failures, failures


def test_per_task_folded_roots(pystack, targets, pythons):  # noqa: F811
    cmd = asyncio_pythons(pythons).get("sid-3.14") or list(asyncio_pythons(pythons).values())[0]
    p = targets.start(cmd + [SCRIPT, "split"])
    t = pystack([p.pid], "-f", "--per-task", json_mode=False)
    time.sleep(3)
    t.stop()
    roots = {}
    for line in t.lines:
        stack, _, count = line.rpartition(" ")
        roots[stack.split(";")[0]] = roots.get(stack.split(";")[0], 0) + int(count)
    assert roots.get("task:cpu-a", 0) > roots.get("task:cpu-b", 0) > 0, roots
    assert set(roots) <= {"task:cpu-a", "task:cpu-b", "[no-task]"}, roots


def test_waiting_tasks_where_and_gather(pystack, targets, pythons):  # noqa: F811
    """--async: 3 tasks in wait_db, 1 in wait_http (75/25 at their lines); gather children
    continued by the parent's frames."""
    pys = asyncio_pythons(pythons)
    procs = {name: targets.start(cmd + [SCRIPT, "wait"]) for name, cmd in pys.items()}
    if has_uvloop():
        procs["debian-3.11-uvloop"] = targets.start(["/usr/bin/python3.11", SCRIPT, "wait", "--uvloop"])
    t = run_pystack(pystack, [p.pid for p in procs.values()], 3, "--async", "-F", "20")
    truths = {name: stop_truth(p) for name, p in procs.items()}
    recs = events(t, "py_task")
    assert_fields_documented("pystack", recs + events(t, "pystack_summary"),
                             optional=("env", "tid", "container_tid", "comm", "thread_name", "status"))
    failures = []
    for name, p in procs.items():
        truth = truths[name]
        mine = [e for e in recs if e["pid"] == p.pid]
        db = http = 0
        for e in mine:
            if e["task_state"] != "waiting":
                continue  # woken for a moment (wait_db's sleep ends 20 times a second)
            frames = parse_stack(e["stack"])
            own = [f for f in frames if f[1] == SCRIPT]
            if e["task"].startswith("db-"):
                db += 1
                if own[-1] != ("wait_db", SCRIPT, truth["wait_db"]):
                    failures.append("%s: %s at %s" % (name, e["task"], e["stack"]))
            elif e["task"] == "http":
                http += 1
                if own[-1] != ("wait_http", SCRIPT, truth["wait_http"]):
                    failures.append("%s: http at %s" % (name, e["stack"]))
            elif e["task"] in ("gather-1", "gather-2"):
                # the child's chain (leaf_wait, then asyncio.sleep) below the parent's frame
                if (own[0] != ("gathered", SCRIPT, truth["gather_line"]) or
                        own[1] != ("leaf_wait", SCRIPT, truth["leaf_wait"]) or e["awaited_by"] != "gatherer"):
                    failures.append("%s: %s at %s (awaited by %r)" % (name, e["task"], e["stack"], e["awaited_by"]))
        if db + http < 20:
            failures.append("%s: %d samples of the waiting tasks" % (name, db + http))
        elif abs(100.0 * db / (db + http) - 75) > 3:
            failures.append("%s: wait_db %d, wait_http %d" % (name, db, http))
    assert not failures, failures[:10]


def parse_pstree(text):
    """{task: [(func, file, line), ...] root first, with the chains of the tasks awaiting it}."""
    out, stack = {}, []  # stack: (indent, kind, value, chain so far)
    for line in text.splitlines():
        m = re.match(r"^([\s│├└─]*)(.*)$", line)
        indent, rest = len(m.group(1)), m.group(2).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        chain = list(stack[-1][2]) if stack else []
        if rest.startswith("(T) "):
            name = rest[4:]
            stack.append((indent, name, chain))
            out[name] = chain
        else:
            fm = re.match(r"^(\S+) (.*):(\d+)$", rest)
            assert fm, "cannot read pstree line %r" % line
            chain = chain + [(fm.group(1), fm.group(2), int(fm.group(3)))]
            stack.append((indent, None, chain))
            task = next(s[1] for s in reversed(stack) if s[1] is not None)
            out[task] = chain
    return out


@pytest.mark.parametrize("version", ["3.14", "3.15"])
def test_tree_equals_asyncio_pstree(pystack, targets, pythons, version):  # noqa: F811
    """~50 tasks in a tree: the chains equal python3.X -m asyncio pstree, frame for frame
    (the target stopped while both read it)."""
    name = "sid-" + version
    if name not in pythons:
        pytest.skip("no " + name)
    p = targets.start(pythons[name] + [SCRIPT, "tree"])
    t = pystack([p.pid], "--async", "-F", "10")
    time.sleep(0.5)
    p.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.3)
        stopped_at = time.time()
        tree = run(pythons[name] + ["-m", "asyncio", "pstree", str(p.pid)]).stdout
        time.sleep(0.6)
        t.stop()
    finally:
        p.send_signal(signal.SIGCONT)
    want = parse_pstree(tree)
    assert len(want) >= 40, tree
    got = {}
    for e in events(t, "py_task"):
        if e["pid"] == p.pid:
            if iso_time(e["time"]) >= stopped_at:
                got.setdefault(e["task"], parse_stack(e["stack"]))
    assert set(got) == set(want), (sorted(set(got) ^ set(want)))
    diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not diff, list(diff.items())[:3]


def function_lines(path):
    """{qualname: (first, last line)} of the functions in path."""
    out = {}
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = (node.lineno, node.end_lineno)
    return out


@pytest.mark.parametrize("name", ["sid-3.14", "pyenv-3.12"])
def test_churn_no_wrong_stack_torn_counted(pystack, targets, pythons, name):  # noqa: F811
    """Tasks created and finished at ~5k/s: no crash, every stack a real chain of the
    program (each frame inside its function, churn_child under churn), torn reads counted."""
    if name not in pythons:
        pytest.skip("no " + name)
    p = targets.start(pythons[name] + [SCRIPT, "churn"])
    t = run_pystack(pystack, [p.pid], 5, "--async", "-F", "99")
    truth = stop_truth(p)
    assert t.returncode == 0
    assert truth["created"] > 5 * 2000, truth  # the target kept its pace while read
    funcs = function_lines(SCRIPT)
    recs = [e for e in events(t, "py_task") if e["pid"] == p.pid]
    assert len(recs) > 500
    bad = []
    for e in recs:
        frames = parse_stack(e["stack"])
        own = [f for f in frames if f[1] == SCRIPT]
        for func, _, line in own:
            lo, hi = funcs.get(func, (0, -1))
            if not lo <= line <= hi:
                bad.append(e["stack"])
        if e["task_coro"] == "churn_child":
            # awaited by the churner's gather, or not yet (created, the gather not reached)
            parent = own[:1] if e["awaited_by"] else []
            if (e["awaited_by"] not in ("", "churner") or [f[0] for f in parent] != (["churn"] if parent else []) or
                    any(f[0] != "churn_child" for f in own[len(parent):])):
                bad.append((e["awaited_by"], e["stack"]))
    assert not bad, bad[:5]
    summary = events(t, "pystack_summary")[-1]
    assert summary["task_samples"] >= len(recs) and "torn_reads" in summary
    print("churn on %s: %d task samples, %d torn reads" % (name, summary["task_samples"], summary["torn_reads"]))


def test_before_3_11_said_once_others_go_on(pystack, targets, pythons):  # noqa: F811
    if "pyenv-3.10" not in pythons:
        pytest.skip("no pyenv-3.10")
    newer = asyncio_pythons(pythons)
    old = targets.start(pythons["pyenv-3.10"] + [SCRIPT, "split"])
    cur = targets.start(list(newer.values())[0] + [SCRIPT, "wait"])
    t = run_pystack(pystack, [old.pid, cur.pid], 2, "--async", "-F", "10")
    said = [line for line in t.stderr.splitlines() if "not supported on this version" in line]
    assert len(said) == 1 and str(old.pid) in said[0] and "3.10" in said[0], said
    assert any(e["pid"] == cur.pid for e in events(t, "py_task"))
