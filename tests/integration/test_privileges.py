"""Least privilege, measured: each tool runs as `nobody` with exactly the capabilities
its man page's REQUIREMENTS lists, against a CPython owned by another uid, and what it
records matches a root run on the same target; with any one of them removed it exits 1
with a message that names the one removed.

The capabilities are read from the man pages (the `.B CAP_X` tags of REQUIREMENTS:
needed; `.BR CAP_X " (...)"`: needed only in the case named), so the pages cannot
promise a set the tools do not run with. The tools are copied to a directory `nobody`
can read; the target runs as uid TARGET_UID, which is neither root nor nobody.
"""
import collections
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, TARGETS, man_capabilities, run

TARGET_UID = 4242
NOBODY = 65534
PYTHON = "/usr/bin/python3.11"
BPF_TOOLS = ["pystack", "pygc", "pygil", "pyoffcpu", "pyloop", "pyhandoff", "tcphandshake", "tcploss"]
# tools that name Python threads but read no target memory otherwise: without
# CAP_SYS_PTRACE their rows carry the comm, and one warning names the capability
NAMES_ONLY = {"pyhandoff", "tcphandshake", "tcploss"}
DURATION = 4
# what offcpu says once without the optional CAP_SYSLOG (pyoffcpu(8), REQUIREMENTS)
NO_CAP_SYSLOG = "%s: warning: kernel stacks stay addresses: their names (/proc/kallsyms) need CAP_SYSLOG"


def setpriv(caps):
    """A command prefix running as nobody with exactly caps (e.g. ["CAP_BPF"])."""
    spec = ",".join("+" + c[len("CAP_"):].lower() for c in sorted(caps))
    cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    if spec:
        return cmd + ["--inh-caps=-all," + spec, "--ambient-caps=" + spec]
    return cmd + ["--inh-caps=-all"]


@pytest.fixture(scope="module")
def place():
    """A directory nobody can read (the tools, the target) with a subdirectory all can write."""
    if not (shutil.which("setpriv") and os.path.exists(PYTHON)):
        pytest.skip("needs setpriv (util-linux) and %s" % PYTHON)
    d = tempfile.mkdtemp(prefix="pyebpf-priv-")
    os.chmod(d, 0o755)
    for tool in BPF_TOOLS + ["pymonitor", "hostnet"]:
        shutil.copy(os.path.join(BUILD, tool), d)
        os.chmod(os.path.join(d, tool), 0o755)
    shutil.copy(os.path.join(TARGETS, "all_kinds.py"), d)
    os.chmod(os.path.join(d, "all_kinds.py"), 0o644)
    out = os.path.join(d, "out")
    os.mkdir(out)
    os.chmod(out, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def target(place):
    """all_kinds.py as uid TARGET_UID (every thread running once it said ready)."""
    proc = subprocess.Popen(["setpriv", "--reuid=%d" % TARGET_UID, "--regid=%d" % TARGET_UID,
                             "--clear-groups", PYTHON, os.path.join(place, "all_kinds.py")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    assert os.stat("/proc/%d" % proc.pid).st_uid == TARGET_UID
    yield proc.pid
    proc.kill()
    proc.wait()


def run_tool(place, tool, args, caps=None, timeout=300):
    """The tool as root (caps None) or as nobody with caps: CompletedProcess."""
    prefix = [] if caps is None else setpriv(caps)
    return subprocess.run(prefix + [os.path.join(place, tool)] + args, capture_output=True, text=True,
                          timeout=timeout)


def records(out):
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def by_metric(recs):
    return collections.Counter(r["metric"] for r in recs)


def names(recs, metric, key="thread_name"):
    return {r[key] for r in recs if r["metric"] == metric and r.get(key)}


def assert_same_kind_of_rows(tool, root, user):
    """The same metrics with the same fields, counts within a factor of 2.5 (a rate, or a few)."""
    rc, uc = by_metric(root), by_metric(user)
    assert set(rc) == set(uc), (tool, rc, uc)
    for metric, n in rc.items():
        keys_root = set().union(*(r.keys() for r in root if r["metric"] == metric))
        keys_user = set().union(*(r.keys() for r in user if r["metric"] == metric))
        assert keys_root == keys_user, (tool, metric, keys_root ^ keys_user)
        if n >= 8:
            assert n / 2.5 <= uc[metric] <= n * 2.5, (tool, metric, n, uc[metric])


# What only a run that read the target's Python state shows (names, frames), per tool.
def python_state(tool, recs):
    if tool == "pystack":
        return names(recs, "py_stack") >= {"spinner-a", "spinner-b"} and any(
            "burn (" in r["stack"] for r in recs if r["metric"] == "py_stack")
    if tool == "pygc":
        return "collector" in names(recs, "gc_pause")
    if tool == "pygil":
        return names(recs, "gil_wait") >= {"spinner-a", "spinner-b"} and any(
            "burn (" in (r.get("waiter_py_stack") or "") for r in recs if r["metric"] == "gil_wait")
    if tool == "pyoffcpu":
        return any(r["thread_name"] == "sleeper" and "sleeper (" in (r.get("py_stack") or "")
                   for r in recs if r["metric"] == "off_cpu")
    if tool == "pyloop":
        return any((r.get("py_frame") or "").startswith("stall (") for r in recs if r["metric"] == "loop_stall")
    if tool == "pyhandoff":
        return "acceptor" in names(recs, "handoff")
    if tool == "tcphandshake":
        return "client" in names(recs, "tcp_connect") and "acceptor" in names(recs, "tcp_accept")
    if tool == "tcploss":
        return "client" in names(recs, "tcp_loss")
    raise AssertionError(tool)


def args_of(tool, pid, duration=DURATION):
    return ["-j", "-p", str(pid), "-d", str(duration)]


def needed(tool):
    caps, conditional = man_capabilities(tool)
    assert caps, "%s.8 lists no capabilities in REQUIREMENTS" % tool
    return caps


def run_pair(place, tool, target, caps, user_state):
    """The tool as root and as nobody with caps, for DURATION, and once more for 3 x
    DURATION when a run that should show Python state did not: on a loaded host a short
    run can catch too few events; a missing capability fails both tries."""
    for duration in (DURATION, 3 * DURATION):
        root = run_tool(place, tool, args_of(tool, target, duration))
        user = run_tool(place, tool, args_of(tool, target, duration), caps)
        if root.returncode or user.returncode or python_state(tool, records(root.stdout)) and \
                (not user_state or python_state(tool, records(user.stdout))):
            break
        print("%s: no Python state in a %d s run, once more" % (tool, duration))
    return root, user


@pytest.mark.parametrize("tool", BPF_TOOLS)
def test_documented_capabilities_are_enough_and_agree_with_root(tool, place, target):
    caps = needed(tool)
    root, user = run_pair(place, tool, target, caps, tool not in NAMES_ONLY or "CAP_SYS_PTRACE" in caps)
    assert root.returncode == 0, root.stderr[-2000:]
    assert user.returncode == 0, (caps, user.stderr[-2000:])
    root_recs, user_recs = records(root.stdout), records(user.stdout)
    assert python_state(tool, root_recs), (tool, by_metric(root_recs), root.stdout[-2000:])
    assert_same_kind_of_rows(tool, root_recs, user_recs)
    if tool in NAMES_ONLY and "CAP_SYS_PTRACE" not in caps:
        # the rows are the same, the names the kernel's: said once, naming the capability
        said = [l for l in user.stderr.splitlines() if "CAP_SYS_PTRACE" in l]
        assert len(said) >= 1 and all("warning:" in l for l in said), user.stderr
        assert "needs CAP_SYS_PTRACE to read pid %d's memory (owned by uid %d)" % (target, TARGET_UID) \
            in user.stderr, user.stderr
        assert not python_state(tool, user_recs)
    else:
        assert python_state(tool, user_recs), (tool, caps, by_metric(user_recs), user.stdout[-2000:],
                                               user.stderr[-2000:])


def error_lines(stderr, tool):
    return [l for l in stderr.splitlines() if l.startswith(tool + ": ") and not l.startswith(tool + ": warning:")
            and "kernel headers:" not in l and "CPython" not in l]


@pytest.mark.parametrize("tool", BPF_TOOLS + ["pymonitor"])
def test_each_capability_removed_is_named(tool, place, target):
    """Without any one documented capability: exit 1, and the first error names that one."""
    caps = needed(tool)
    args = args_of(tool, target) if tool != "pymonitor" else \
        ["-p", str(target), "-e", "t", "-d", "1", "--sqlite", os.path.join(place, "out", "removed.db")]
    for cap in caps:
        r = run_tool(place, tool, args, [c for c in caps if c != cap])
        errors = error_lines(r.stderr, tool)
        assert r.returncode == 1 and r.stdout == "", (tool, cap, r.returncode, r.stderr)
        assert errors and cap in errors[0] and "needs" in errors[0], (tool, cap, r.stderr)


def test_names_only_tools_with_cap_sys_ptrace_name_python_threads(place, target):
    """The optional CAP_SYS_PTRACE of the network tools gives the Python thread names back."""
    caps, conditional = man_capabilities("tcphandshake")
    assert "CAP_SYS_PTRACE" in conditional
    user = run_tool(place, "tcphandshake", args_of("tcphandshake", target), caps + ["CAP_SYS_PTRACE"])
    assert user.returncode == 0, user.stderr
    assert python_state("tcphandshake", records(user.stdout)), user.stdout[-2000:]
    assert "CAP_" not in user.stderr


def test_pygil_uprobe_hooks_need_cap_sys_admin(place, target):
    caps, conditional = man_capabilities("pygil")
    assert "CAP_SYS_ADMIN" in conditional and "CAP_SYS_ADMIN" not in caps
    r = run_tool(place, "pygil", ["-p", str(target), "-d", "1", "--hook", "condvar"], caps)
    assert r.returncode == 1, r.stderr
    assert error_lines(r.stderr, "pygil")[0].startswith("pygil: needs CAP_SYS_ADMIN to attach uprobes"), r.stderr


def test_pymonitor_documented_capabilities_fill_the_same_tables(place, target):
    caps = needed("pymonitor")
    counts = {}
    for who, use in (("root", None), ("user", caps)):
        db = os.path.join(place, "out", who + ".db")
        r = run_tool(place, "pymonitor", ["-p", str(target), "-e", "t", "-d", str(DURATION), "--sqlite", db, "--raw-samples"], use)
        assert r.returncode == 0, (who, r.stderr[-3000:])
        # nothing missing, but the optional CAP_SYSLOG (pymonitor(8), REQUIREMENTS), said once
        lines = r.stderr.splitlines()
        assert lines.count(NO_CAP_SYSLOG % "pymonitor") == (who == "user"), (who, r.stderr[-3000:])
        said = [l for l in lines if l != NO_CAP_SYSLOG % "pymonitor" and ("could not" in l or "CAP_" in l)]
        assert not said, (who, r.stderr[-3000:])
        with sqlite3.connect(db) as c:
            tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            counts[who] = {t: c.execute("SELECT count(*) FROM %s" % t).fetchone()[0] for t in tables}
        with sqlite3.connect(db) as c:
            threads = {n for (n,) in c.execute("SELECT DISTINCT thread_name FROM ebpf_gc_pause")}
        assert threads == {"collector"}, (who, threads)
    filled = {w: {t for t, n in c.items() if n} for w, c in counts.items()}
    assert filled["root"] == filled["user"], counts
    for t in ("ebpf_gc_pause", "ebpf_py_stacks", "ebpf_off_cpu", "ebpf_gil_wait", "ebpf_tcp_connect"):
        assert counts["root"][t] >= 8, counts
        assert counts["root"][t] / 2.5 <= counts["user"][t] <= counts["root"][t] * 2.5, (t, counts)


def test_hostnet_needs_no_capability(place, target):
    assert man_capabilities("hostnet") == ([], [])
    snaps = {}
    for who, use in (("root", None), ("user", [])):
        r = run_tool(place, "hostnet", ["-j", "-c", "1"], use)
        assert r.returncode == 0, r.stderr
        snaps[who] = [e for e in records(r.stdout) if e["metric"] == "host_net_health"][0]
    assert set(snaps["root"]) == set(snaps["user"])
    python = [p for p in json.loads(snaps["user"]["fd_usage_json"]) if p["proc"] == "python"][0]
    assert python["pids"] >= 1 and python["unreadable"] == 0, python
    assert snaps["user"]["listen"] >= 1 and snaps["user"]["warnings"] == [], snaps["user"]


def test_perf_buffers_beyond_the_memlock_limit_need_cap_ipc_lock(place, target):
    """tcploss's perf buffers (4 MiB per CPU) under a 1 MiB memlock limit: the one message
    names CAP_IPC_LOCK; given it, the same limit is no obstacle."""
    caps, conditional = man_capabilities("tcploss")
    assert "CAP_IPC_LOCK" in conditional
    limit = ["prlimit", "--memlock=1048576:1048576"]
    args = [os.path.join(place, "tcploss"), "-j", "-p", str(target), "-d", "1"]
    r = subprocess.run(limit + setpriv(caps) + args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    assert error_lines(r.stderr, "tcploss")[0].startswith(
        "tcploss: needs CAP_IPC_LOCK to lock its perf buffers (4100 KiB per CPU) beyond the memlock "
        "limit (1024 KiB"), r.stderr
    r = subprocess.run(limit + setpriv(caps + ["CAP_IPC_LOCK"]) + args, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert by_metric(records(r.stdout))["tcp_loss"] >= 5, r.stdout


def sysctl(name):
    with open("/proc/sys/kernel/" + name) as f:
        return int(f.read())


def test_pyoffcpu_names_kernel_frames_with_cap_syslog_only(place, target):
    """Kernel frames as root's names with the optional CAP_SYSLOG; addresses without it,
    said once at the start (where the kernel shows kallsyms to CAP_SYSLOG only)."""
    caps, conditional = man_capabilities("pyoffcpu")
    assert "CAP_SYSLOG" in conditional and "CAP_SYSLOG" not in caps
    restrict, paranoid = sysctl("kptr_restrict"), sysctl("perf_event_paranoid")
    if restrict != 1 and not (restrict == 0 and paranoid > 1):
        pytest.skip("kernel.kptr_restrict %d, perf_event_paranoid %d: kallsyms is not shown to "
                    "CAP_SYSLOG only here" % (restrict, paranoid))

    def kernel_frames(r):
        assert r.returncode == 0, r.stderr[-2000:]
        frames = [f for e in records(r.stdout) if e["metric"] == "off_cpu" for f in e["kernel_stack"]]
        assert frames, r.stdout[-2000:]
        return frames

    root = kernel_frames(run_tool(place, "pyoffcpu", args_of("pyoffcpu", target)))
    named = run_tool(place, "pyoffcpu", args_of("pyoffcpu", target), caps + ["CAP_SYSLOG"])
    bare = run_tool(place, "pyoffcpu", args_of("pyoffcpu", target), caps)
    assert "__schedule [kernel]" in root and not any(f.startswith("0x") for f in root), root[:20]
    assert set(kernel_frames(named)) & set(root) and not any(f.startswith("0x") for f in kernel_frames(named))
    assert "CAP_SYSLOG" not in named.stderr, named.stderr
    assert all(re.match(r"0x[0-9a-f]+ \[kernel\]$", f) for f in kernel_frames(bare)), kernel_frames(bare)[:20]
    said = [l for l in bare.stderr.splitlines() if "CAP_SYSLOG" in l]
    assert said == [NO_CAP_SYSLOG % "pyoffcpu"], bare.stderr
    assert bare.stderr.index("CAP_SYSLOG") < bare.stderr.index("Hit Ctrl-C"), bare.stderr
