"""The asyncio task of pyoffcpu, pygc and pyloop records (task, task_coro) and pyoffcpu's
--per-task folded totals, against what the target measured itself: tests/targets/
py_tasks.py steps runs named tasks one after the other on its loop thread (block-a and
block-b blocking it in time.sleep, spin burning the CPU, gc-maker collecting), timing
each step (wall clock) and each sleep (time.monotonic), and counting per task the
collections its gc.callbacks saw begin while asyncio's current task was that task.

The four tools trace one run of the steps on every 3.11+ interpreter at once.
"""
import json
import os
import select
import signal

import pytest

from conftest import TARGETS, Tool, assert_fields_documented
from test_pystack import iso_time, parse_stack, pythons  # noqa: F401
from test_pystack_async import asyncio_pythons

SCRIPT = os.path.join(TARGETS, "py_tasks.py")
ROUNDS = 5  # py_tasks.py's STEP_ROUNDS


def missed(tool):
    """Records a tool may lack: as many as the kernel skipped its programs (the summary's
    missed: a program that would nest in another on the CPU does not run). A record it
    has names its task (although every task has ended when the tool reads its records:
    the BPF walk reads the task at the event), and a name given is always checked."""
    return tool.summary()["missed"]


def read_line(p, timeout):
    r, _, _ = select.select([p.stdout], [], [], timeout)
    assert r, "target %d printed nothing in %d s" % (p.pid, timeout)
    return p.stdout.readline().decode()


@pytest.fixture(scope="module")
def steps_run(pythons, tmp_path_factory):  # noqa: F811
    """({interpreter: (pid, truth)}, {tool run: stopped Tool}) of one run of the steps."""
    from test_pystack import Targets
    targets = Targets()
    targets.db = str(tmp_path_factory.mktemp("steps") / "offcpu.db")
    tools = {}
    try:
        procs = {name: targets.start(cmd + [SCRIPT, "steps"]) for name, cmd in asyncio_pythons(pythons).items()}
        pids = ",".join(str(p.pid) for p in procs.values())
        # its records also into SQLite: --from --per-task reads them back
        tools["offcpu"] = Tool("pyoffcpu", ["-p", pids, "-e", "steps", "--sqlite", targets.db, "--also-stdout"])
        tools["per_task"] = Tool("pyoffcpu", ["-p", pids, "-f", "--per-task"], json_mode=False)
        tools["gc"] = Tool("pygc", ["-p", pids, "--stack"])
        tools["loop"] = Tool("pyloop", ["-p", pids, "--min-ms", "80"])
        for t in tools.values():
            t.wait_ready()
        for p in procs.values():
            p.send_signal(signal.SIGUSR1)
        truths = {name: (p.pid, json.loads(read_line(p, 120))) for name, p in procs.items()}
        for t in tools.values():
            t.stop()
        tools["offcpu"].db = targets.db
        yield truths, tools
    finally:
        for t in tools.values():
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait()
        targets.stop_all()


def step_at(truth, when, slack=0.005):
    """The step (task name) whose wall-clock span holds when, or None."""
    for name, w0, w1 in truth["steps"]:
        if w0 - slack <= when <= w1 + slack:
            return name
    return None


def test_off_cpu_records_carry_their_task(steps_run):
    truths, tools = steps_run
    t = tools["offcpu"]
    recs = t.events("off_cpu")
    assert_fields_documented("pyoffcpu", recs + t.events("off_cpu_thread") + t.events("pyoffcpu_summary"))
    failures = []
    lack = missed(t)
    for name, (pid, truth) in truths.items():
        mine = [e for e in recs if e["pid"] == pid]
        # every period in step_block is its step's task's, by the wall clock
        wrong = [(e["time"][11:], e["task"], step_at(truth, iso_time(e["time"])), e["duration_ms"]) for e in mine
                 if "step_block" in e["py_stack"] and e["task"] != step_at(truth, iso_time(e["time"]))]
        if wrong:
            failures.append("%s: periods in step_block named (time, task, step then, ms): %s" % (name, wrong))
        for task, secs in (("block-a", 0.2), ("block-b", 0.1)):
            got = [e for e in mine if e["task"] == task]
            if not ROUNDS - lack <= len(got) <= ROUNDS:
                failures.append("%s: %d records of %s, %d sleeps (%d programs skipped; summary %s): %s" % (
                    name, len(got), task, ROUNDS, lack, t.summary(),
                    [(e["time"][11:], e["task"], e["duration_ms"]) for e in mine if "step_block" in e["py_stack"]]))
                continue
            for e in got:
                leaf = parse_stack(e["py_stack"])[-1]
                # the sleep the step measured: the period began inside it (its wall span)
                if (e["task_coro"] != "step_block" or leaf[0] != "step_block" or leaf[2] != truth["step_block"]
                        or step_at(truth, iso_time(e["time"])) != task or abs(e["duration_ms"] - 1000 * secs) > 30):
                    failures.append("%s: %s %s" % (name, task, json.dumps(e)[:600]))
        # a period outside any task (the loop waiting in its poller) names none; one in
        # the driver's own coroutine (preempted there: a busy host) names the driver
        for e in mine:
            if "step_" in e["py_stack"] or "warm_up" in e["py_stack"]:
                continue
            want = ("driver", "steps") if "steps (" in e["py_stack"] else ("", "")
            if (e["task"], e["task_coro"]) != want:
                failures.append("%s: %s's period outside the steps: %s" % (name, e["task"], e["py_stack"][-300:]))
                break
    assert not failures, failures[:8]


def test_per_task_folded_totals_equal_measured_sleeps(steps_run):
    """--per-task -f: under task:block-a and task:block-b, the time the tasks measured around
    their sleeps (3% + 2 ms a sleep: off-CPU is the sleep less the switches)."""
    truths, tools = steps_run
    t = tools["per_task"]
    assert t.returncode == 0, t.stderr[-2000:]
    roots = {}
    for line in t.stdout.splitlines():
        stack, _, us = line.rpartition(" ")
        root = stack.split(";")[0]
        roots[root] = roots.get(root, 0) + int(us)
    # every interpreter's tasks go under the same names: the truths add up
    for task in ("block-a", "block-b"):
        want = sum(truth["blocked"][task] for _, truth in truths.values()) * 1e6
        got = roots.get("task:" + task, 0)
        assert abs(got - want) <= 0.03 * want + 2000 * ROUNDS * len(truths), (task, got, want, roots)
    assert set(roots) <= {"task:block-a", "task:block-b", "task:spin", "task:gc-maker", "task:driver",
                          "task:warm-up", "[no-task]"}, roots
    assert roots.get("[no-task]", 0) > 0, roots  # the loops waiting in their pollers


def test_per_task_from_stored_records(steps_run):
    """pyoffcpu --from --per-task -f on the stored records: each record under its task
    (task:NAME, [no-task] for none), the same stacks and microseconds as the live
    records folded here, and the per-task sums as the live --per-task run's within
    the rounding of a record's time (half a microsecond a period)."""
    from test_stored_events import off_cpu_key
    from conftest import run, tool_path
    truths, tools = steps_run
    recs = tools["offcpu"].events("off_cpu")
    want = {}
    for e in recs:
        root = "task:" + e["task"] if e["task"] else "[no-task]"
        key = ";".join([root.replace(";", "_").replace(" ", "_")] + off_cpu_key(e).split(";")[1:])
        want[key] = want.get(key, 0) + round(e["duration_ms"] * 1000)
    res = run([tool_path("pyoffcpu"), "--from", "sqlite:" + tools["offcpu"].db, "-e", "steps", "-f", "--per-task"],
              check=False)
    assert res.returncode == 0, res.stderr
    got = {}
    for line in res.stdout.splitlines():
        stack, _, us = line.rpartition(" ")
        got[stack] = got.get(stack, 0) + int(us)
    assert got == {k: v for k, v in want.items() if v}
    for task in ("block-a", "block-b"):
        stored = sum(v for k, v in got.items() if k.startswith("task:%s;" % task))
        live = sum(int(l.rpartition(" ")[2]) for l in tools["per_task"].stdout.splitlines()
                   if l.startswith("task:%s;" % task))
        assert stored > 0 and abs(stored - live) <= 0.03 * live + 2000 * ROUNDS * len(truths), (task, stored, live)


def test_gc_pauses_carry_their_task(steps_run):
    """pygc --stack: as many collections under task gc-maker as its gc.callbacks counted."""
    truths, tools = steps_run
    recs = tools["gc"].events("gc_pause")
    failures = []
    for name, (pid, truth) in truths.items():
        mine = [e for e in recs if e["pid"] == pid and e["task"] != "warm-up"]
        got = sum(e["task"] == "gc-maker" for e in mine)
        want = truth["gc"].get("gc-maker", 0)
        if want < ROUNDS or not want - missed(tools["gc"]) <= got <= want:
            failures.append("%s: %d pauses in gc-maker, its gc.callbacks counted %d" % (name, got, want))
        for e in mine:
            if e["task"] == "gc-maker" and (e["task_coro"] != "step_gc" or
                                            not any(f.startswith("step_gc (") for f in e["stack"])):
                failures.append("%s: %s" % (name, json.dumps(e)[:500]))
                break
    assert not failures, failures


def test_loop_stalls_carry_the_task_that_stalled(steps_run):
    """pyloop: each stall of the steps is the task the target ran then (by the wall clock),
    and every blocking or spinning step stalled once (a stall whose stack is in the step's
    coroutine names its task; a name is always the right one)."""
    truths, tools = steps_run
    recs = tools["loop"].events("loop_stall")
    lack = missed(tools["loop"])
    failures = []
    for name, (pid, truth) in truths.items():
        mine = [e for e in recs if e["pid"] == pid]
        counts = {}
        for e in mine:
            want = step_at(truth, iso_time(e["time"]))
            if want in (None, "warm-up"):
                continue  # a stall outside the steps (start-up, a busy host)
            counts[want] = counts.get(want, 0) + 1
            in_step = "step_block (" in e["py_stack"] or "step_spin (" in e["py_stack"]
            if e["task"] and e["task"] != want or not e["py_stack"] and e["task"] or in_step and not e["task"]:
                failures.append("%s: a stall in step %s named task %r (%s)" % (name, want, e["task"], e["py_stack"][-200:]))
        for task in ("block-a", "block-b", "spin"):
            if not ROUNDS - lack <= counts.get(task, 0) <= ROUNDS:
                failures.append("%s: %d stalls in %s steps, %d steps (%d programs skipped): %s" % (
                    name, counts.get(task, 0), task, ROUNDS, lack,
                    [(e["time"], e["task"], e["duration_ms"], e["py_frame"]) for e in mine]))
    assert not failures, failures[:8]
