"""pystack against real interpreters (every one tests/targets/pythons.sh lists), with
ground truths that do not come from pystack: the targets' own thread_time split,
the source line of a busy loop, an independent walker that reads /proc/PID/mem
(the oracle: PYWALK_ORACLE names the script, which is not part of this repository),
threading's names, a known recursion depth, PID namespaces.

One pystack run samples the same target on all interpreters at once (one compile).
"""
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import ROOT, TARGETS, assert_fields_documented, run, tool_path

ORACLE = os.environ.get("PYWALK_ORACLE", os.path.join(os.path.dirname(ROOT), "shared", "tools",
                                                      "pywalk-oracle.py"))
if not os.path.exists(ORACLE):
    ORACLE = "/work/shared/tools/pywalk-oracle.py"
FRAME_RE = re.compile(r"^(.*) \((.*):(\d+)\)$")


@pytest.fixture(scope="module")
def pythons():
    """{name: argv} from tests/targets/pythons.sh (fetches Debian sid's once, cached)."""
    res = subprocess.run([os.path.join(TARGETS, "pythons.sh")], capture_output=True, text=True,
                         timeout=900)
    out = {}
    for line in res.stdout.splitlines():
        name, _, cmd = line.partition("\t")
        if name and cmd:
            out[name] = cmd.split()
    if not any(n.startswith(("pyenv-", "debian-", "sid-")) for n in out):
        pytest.skip("no supported interpreters found by pythons.sh: %s" % res.stderr[-500:])
    return out


def supported(pythons):
    """The supported interpreters; of the ld.so-launched variants only 3.14 (fewer CPU burners)."""
    return {n: c for n, c in pythons.items()
            if not n.startswith("unsupported-") and (not n.endswith("-ldso") or n == "sid-3.14-ldso")}


class Targets:
    """Target processes started for one test; all killed (by pid) at the end."""

    def __init__(self):
        self.procs = []

    def start(self, argv, ready_timeout=60, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        deadline = time.time() + ready_timeout
        line = b""
        while time.time() < deadline:
            line = p.stdout.readline()
            if line or p.poll() is not None:
                break
        if not line:
            raise AssertionError("target %s did not start: %s" % (argv, p.stderr.read()[-2000:]))
        p.first_line = line.decode().strip()
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def targets():
    t = Targets()
    yield t
    t.stop_all()


def parse_stack(stack):
    """'f (file:line);g (file:line)' root first -> [(func, file, line)] (markers kept as (m,None,None))."""
    out = []
    for part in stack.split(";") if stack else []:
        m = FRAME_RE.match(part)
        out.append((m.group(1), m.group(2), int(m.group(3))) if m else (part, None, None))
    return out


def busy_line(path):
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if "BUSY" in line and "while True" in line:
                return i
    raise AssertionError("no BUSY line in " + path)


class Pystack:
    """pystack -j in the background; stdout is read all the time (a full pipe would stall
    the tool and lose samples), stderr goes to a file. Compiles can take minutes on a
    loaded machine, so the ready wait is long."""

    def __init__(self, pids, *extra, json_mode=True):
        args = [tool_path("pystack")] + (["-j"] if json_mode else [])
        for p in pids:
            args += ["-p", str(p)]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args + list(extra), stdout=subprocess.PIPE, stderr=self.err)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.returncode = None

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode())

    def _stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def wait_ready(self, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "Hit Ctrl-C to end." in self._stderr():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.proc.kill()
        raise AssertionError("pystack did not start: " + self._stderr())

    def stop(self, timeout=120):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(timeout=30)
        self.stdout = "".join(self.lines)
        self.stderr = self._stderr()
        return self

    def events(self, metric=None):
        lines = [json.loads(l) for l in self.stdout.splitlines() if l.strip()]
        return [e for e in lines if metric is None or e.get("metric") == metric]


@pytest.fixture
def pystack():
    started = []

    def start(pids, *extra, json_mode=True, ready=True):
        t = Pystack(pids, *extra, json_mode=json_mode)
        started.append(t)
        return t.wait_ready() if ready else t

    yield start
    for t in started:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


def sample(pystack, pids, seconds, *extra):
    t = pystack(pids, *extra)
    time.sleep(seconds)
    t.stop()
    assert t.returncode == 0, t.stderr
    return t


def iso_time(s):
    """'2026-12-02T17:18:07.881027Z' -> seconds since the epoch."""
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def by_pid(events):
    out = {}
    for e in events:
        out.setdefault(e["pid"], []).append(e)
    return out


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat (the kernel's accounting)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_cpu_split_70_30(pystack, pythons, targets):
    """a() 70% / b() 30%: pystack's shares within 4 points of the target's own timing.

    One pystack run (one compile) samples this test's own child processes (--children);
    the interpreters run in groups of four on this 2-CPU machine, so that they compete
    for CPU, and each target measures exactly the window its samples are counted in.
    Each target's sample count must also match its CPU time times the frequency: when
    pystack was woken by every sample, the scheduler switched tasks at sample instants,
    the samples went to whoever ran before each tick (up to 6% too many for one target),
    and shares came out 3-12 points off on a busy machine. So no more than 5% too many.
    Too few are allowed down to 15%: on 2026-12-05 two runs in four had targets 9 to 12%
    short, with nothing lost or missed (their shares 1 to 3.5 points off), and perf
    record's own cpu-clock samples of busy loops were 2 to 12% short on the same VM: its
    timer misses periods (pystack(8), OVERHEAD)."""
    hz = 999
    t = pystack([os.getpid()], "--children", "-F", str(hz))
    names = list(supported(pythons))
    procs, outs, windows, cpu = {}, {}, {}, {}
    for i in range(0, len(names), 4):
        group = {n: targets.start(supported(pythons)[n] + [os.path.join(TARGETS, "py_split.py")])
                 for n in names[i:i + 4]}
        time.sleep(3)  # --children looks for new processes every second
        for p in group.values():
            p.send_signal(signal.SIGUSR1)
        begin = time.time()
        cpu0 = {n: cpu_seconds(p.pid) for n, p in group.items()}
        time.sleep(12)  # ~6000 samples a target: a share's sampling error ~0.6 points
        end = time.time()
        cpu.update({n: cpu_seconds(p.pid) - cpu0[n] for n, p in group.items()})
        for p in group.values():
            p.send_signal(signal.SIGTERM)
        for n, p in group.items():
            outs[n], _ = p.communicate(timeout=60)
            windows[n] = (begin, end)
        procs.update(group)
    t.stop()
    assert t.returncode == 0, t.stderr
    samples = by_pid(t.events("py_stack"))
    failures, report = [], []
    for name, p in procs.items():
        out = outs[name]
        begin, end = windows[name]
        mine = [e for e in samples.get(p.pid, []) if begin + 0.05 <= iso_time(e["time"]) <= end - 0.05]
        truth = json.loads(out.decode().strip().splitlines()[-1])
        truth_a = truth["a"] / (truth["a"] + truth["b"])
        na = nb = 0
        for e in mine:
            funcs = [f for f, _, _ in parse_stack(e["stack"])]
            na += "a" in funcs
            nb += "b" in funcs
        share = na / (na + nb) if na + nb else 0.0
        expected = cpu[name] * hz
        report.append("%s: pystack %.1f%% (%d samples, %d expected from %.2f CPU s) target %.1f%%" % (
            name, 100 * share, len(mine), expected, cpu[name], 100 * truth_a))
        # the truth is the target's own timing; its distance from 70% only shows that
        # the split happened (it drifts with the interpreter and the load: sid-3.15
        # measured itself at 76.2% in one full run on 2026-12-05, and pystack 76.3%)
        if na + nb < 200 or abs(share - truth_a) > 0.04 or abs(truth_a - 0.7) > 0.1 or \
                not 0.85 * expected <= len(mine) <= 1.05 * expected:
            failures.append(report[-1])
    print("\n".join(report))
    assert not failures, "\n".join(failures + ["all: "] + report)


def test_busy_line_and_whole_stack_match_oracle(pystack, pythons, targets):
    """Leaf function/file/line exact; the whole stack equals the oracle's for that thread."""
    script = os.path.join(TARGETS, "py_busyline.py")
    line = busy_line(script)
    procs = {name: targets.start(cmd + [script]) for name, cmd in supported(pythons).items()}
    t = sample(pystack, [p.pid for p in procs.values()], 8, "-F", "199", "-e", "test")
    # task_state and awaited_by: the --async records (test_pystack_async.py)
    assert_fields_documented("pystack", t.events(), optional=("env", "task_state", "awaited_by"))
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, p in procs.items():
        got = samples.get(p.pid, [])
        if not got:
            failures.append("%s: no samples" % name)
            continue
        res = run(["/usr/bin/python3", ORACLE, str(p.pid), "--json"], check=False)
        if res.returncode:
            failures.append("%s: the oracle failed: %s" % (name, res.stderr[-300:]))
            continue
        oracle = json.loads(res.stdout)
        # the oracle lists 3.12+ interpreter shim frames (owner >= 3) too: pystack skips them
        frames = [f for f in oracle["threads"][0]["frames"] if "file" in f and f.get("owner", 0) < 3]
        want = [(f.get("qualname") or f["func"], f["file"], f["line"]) for f in reversed(frames)]
        for e in got:
            # outside a PID namespace the container ids are the host ids
            assert (e["container_pid"], e["container_tid"]) == (e["pid"], e["tid"]), e
            st = parse_stack(e["stack"])
            leaf = (e["leaf_func"], e["leaf_file"], e["leaf_line"])
            if e["status"] != "complete" or leaf != ("spin", script, line) or st != want \
                    or e["stack_depth"] != len(want):
                failures.append("%s: %s %s != oracle %s" % (name, e["status"], st, want))
                break
    assert not failures, "\n".join(failures)


def test_thread_names(pystack, pythons, targets):
    """10 named threads: the set of thread_name values is exactly those names."""
    script = os.path.join(TARGETS, "py_threads.py")
    procs = {name: targets.start(cmd + [script]) for name, cmd in supported(pythons).items()}
    t = sample(pystack, [p.pid for p in procs.values()], 12, "-F", "499")
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, p in procs.items():
        want = set(json.loads(p.first_line))
        got = {e["thread_name"] for e in samples.get(p.pid, [])}
        if got != want:
            failures.append("%s: missing %s, unexpected %s" % (name, sorted(want - got), sorted(got - want)))
    assert not failures, "\n".join(failures)


def test_thread_without_gil_is_found(pystack, pythons, targets):
    """A thread inside C code with the GIL released still gets its Python stack."""
    script = os.path.join(TARGETS, "py_nogil.py")
    procs = {name: targets.start(cmd + [script]) for name, cmd in supported(pythons).items()}
    t = sample(pystack, [p.pid for p in procs.values()], 8, "-F", "199")
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, p in procs.items():
        hasher = int(p.first_line)
        got = [e for e in samples.get(p.pid, []) if e["container_tid"] == hasher]
        bad = [e for e in got if e["leaf_func"] != "hash_loop" or e["thread_name"] != "hasher"]
        if len(got) < 3 or bad:
            failures.append("%s: %d samples of the hasher, wrong: %s" % (name, len(got), bad[:1]))
    assert not failures, "\n".join(failures)


def test_thread_started_after_pystack(pystack, pythons, targets):
    """A thread created after pystack attached is found, with its Python name."""
    script = os.path.join(TARGETS, "py_late_thread.py")
    procs = {name: targets.start(cmd + [script]) for name, cmd in supported(pythons).items()}
    t = pystack([p.pid for p in procs.values()], "-F", "199")
    for p in procs.values():
        p.send_signal(signal.SIGUSR1)
    settled = time.time() + 2  # the thread's first moments run threading's bootstrap code
    time.sleep(7)
    t.stop()
    assert t.returncode == 0, t.stderr
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, p in procs.items():
        got = [e for e in samples.get(p.pid, []) if e["tid"] != p.pid and iso_time(e["time"]) >= settled]
        bad = [e for e in got if e["thread_name"] != "late-starter" or e["leaf_func"] != "late_work"]
        if len(got) < 3 or bad:
            failures.append("%s: %d samples of the new thread, wrong: %s" % (name, len(got), bad[:1]))
    assert not failures, "\n".join(failures)


def test_deep_recursion_is_marked_truncated(pystack, pythons, targets):
    """300 frames deep, --max-depth 128: status truncated, the 128 innermost frames right."""
    script = os.path.join(TARGETS, "py_recurse.py")
    line = busy_line(script)
    procs = {name: targets.start(cmd + [script, "300"]) for name, cmd in supported(pythons).items()}
    t = sample(pystack, [p.pid for p in procs.values()], 6, "-F", "199")
    samples = by_pid(t.events("py_stack"))
    summary = [json.loads(l) for l in t.stdout.splitlines() if '"pystack_summary"' in l]
    assert summary and summary[0]["truncated"] > 0
    failures = []
    for name, p in procs.items():
        got = samples.get(p.pid, [])
        if not got:
            failures.append("%s: no samples" % name)
        for e in got:
            st = parse_stack(e["stack"])
            ok = (e["status"] == "truncated" and e["stack_depth"] == 128 and len(st) == 129
                  and st[0][0] == "[truncated]" and st[-1] == ("leaf", script, line)
                  and all(f == "rec" for f, _, _ in st[1:-1]))
            if not ok:
                failures.append("%s: %s depth %s: %s" % (name, e["status"], e["stack_depth"], st[:3]))
                break
    assert not failures, "\n".join(failures)


def test_non_ascii_names_are_utf8(pystack, pythons, targets, tmp_path):
    """Function and file names with latin-1, BMP and non-BMP characters come out right."""
    d = tmp_path / "dïr_文件"
    d.mkdir()
    script = d / "py_ünïcode_𠀀.py"
    script.write_text("def fünc_ä():\n    return 计算()\n\n\ndef 计算():\n    return 𠀀x()\n\n\n"
                      "def 𠀀x():\n    n = 0\n    while True: n += 1\n\n\nprint('ready', flush=True)\n"
                      "fünc_ä()\n", encoding="utf-8")
    procs = {name: targets.start(cmd + [str(script)]) for name, cmd in supported(pythons).items()}
    t = sample(pystack, [p.pid for p in procs.values()], 6, "-F", "199")
    # the JSON parsed, so it is valid UTF-8; now the exact strings
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, p in procs.items():
        got = samples.get(p.pid, [])
        st = parse_stack(got[0]["stack"]) if got else []
        want = [("<module>", str(script), 15), ("fünc_ä", str(script), 2), ("计算", str(script), 6),
                ("𠀀x", str(script), 11)]
        if st != want:
            failures.append("%s: %s" % (name, st))
    assert not failures, "\n".join(failures)


def sid_root(pythons):
    cmd = pythons.get("sid-3.14-ldso")
    if not cmd:
        return None
    return cmd[-1].split("/usr/bin/")[0]


def test_pid_namespace_host_and_container_ids(pystack, pythons, targets):
    """Targets in their own PID namespace (one also in its own root): host and namespace ids."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    busy = os.path.join(TARGETS, "py_busyline.py")
    launchers, inside = [], None
    if os.path.exists("/usr/bin/python3.11"):
        launchers.append(("debian-3.11", ["unshare", "--pid", "--fork", "--mount-proc",
                                          "/usr/bin/python3.11", busy], busy))
    root = sid_root(pythons)
    if root:
        # a container-like root: sid's own files, its own /proc, the script copied in
        for link, to in (("lib64", "usr/lib64"), ("lib", "usr/lib"), ("bin", "usr/bin")):
            if not os.path.lexists(os.path.join(root, link)):
                os.symlink(to, os.path.join(root, link))
        os.makedirs(os.path.join(root, "proc"), exist_ok=True)
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        inside = "/tmp/py_busyline_%d.py" % os.getpid()
        shutil.copy(busy, root + inside)
        launchers.append(("sid-3.14-chroot", ["unshare", "--pid", "--fork",
                                              "--mount-proc=%s/proc" % root, "chroot", root,
                                              "/usr/bin/python3.14", inside], inside))
    if not launchers:
        pytest.skip("no interpreter to run in a PID namespace")
    hosts = {}
    try:
        for name, argv, path in launchers:
            p = targets.start(argv)
            # the python process is unshare's child: pid 1 in the new namespace
            child = int(run(["pgrep", "-P", str(p.pid)]).stdout.split()[0])
            hosts[name] = (child, path)
        t = sample(pystack, [c for c, _ in hosts.values()], 6, "-F", "199")
    finally:
        # pid 1 of a namespace ignores SIGTERM; killing unshare does not end it
        for child, _ in hosts.values():
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if inside and os.path.exists(root + inside):
            os.unlink(root + inside)
    samples = by_pid(t.events("py_stack"))
    failures = []
    for name, (pid, path) in hosts.items():
        got = samples.get(pid, [])
        if not got:
            failures.append("%s: no samples" % name)
            continue
        e = got[0]
        if not (e["pid"] == pid and e["tid"] == pid and e["container_pid"] == 1
                and e["container_tid"] == 1 and e["leaf_func"] == "spin" and e["leaf_file"] == path):
            failures.append("%s: %s" % (name, e))
    assert not failures, "\n".join(failures)


def test_not_python_is_a_clear_error(targets):
    p = targets.start(["sh", "-c", "echo ready; exec sleep 100"])
    time.sleep(0.3)
    res = run([tool_path("pystack"), "-p", str(p.pid), "-d", "1"], check=False)
    assert res.returncode == 1
    # a pid that is not CPython is skipped with a warning naming it; none left: exit 1
    assert 'pystack: warning: no CPython found in pid %d (comm "sleep"): skipped' % p.pid in res.stderr, res.stderr
    assert "pystack: no -p pid is left to trace" in res.stderr, res.stderr


@pytest.mark.parametrize("version", ["2.7", "3.6", "3.7"])
def test_unsupported_version_is_named(pythons, targets, version):
    cmd = pythons.get("unsupported-" + version)
    if not cmd:
        pytest.skip("python%s is not installed (pyenv)" % version)
    p = targets.start(cmd + ["-c", "import time, sys; sys.stdout.write('ready\\n'); "
                                   "sys.stdout.flush(); time.sleep(100)"])
    res = run([tool_path("pystack"), "-p", str(p.pid), "-d", "1"], check=False)
    assert res.returncode == 1
    assert "CPython %s" % version in res.stderr and "supported: 3.8-3.15" in res.stderr, res.stderr


def test_target_exit_mid_run(pystack, pythons, targets):
    """The only target exits: pystack says so, prints its table and summary, exits 0."""
    cmd = supported(pythons).get("pyenv-3.12") or next(iter(supported(pythons).values()))
    p = targets.start(cmd + [os.path.join(TARGETS, "py_exit_soon.py"), "2"])
    t = pystack([p.pid], "-d", "600", json_mode=False)
    p.send_signal(signal.SIGUSR1)  # exits 2 s from now
    try:
        t.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    t.stop()
    assert t.returncode == 0, t.stderr
    assert "pid %d exited" % p.pid in t.stderr
    assert "samples=" in t.stderr
    assert "%OWN" in t.stdout and "<module>" in t.stdout


def test_children(pystack, pythons, targets):
    """--children: a parent that only waits; its two Python children are sampled."""
    cmd = pythons.get("pyenv-3.11") or pythons.get("debian-3.11")
    if not cmd:
        pytest.skip("no 3.11 interpreter")
    p = targets.start(cmd + [os.path.join(TARGETS, "py_children.py"), "2"])
    kids = json.loads(p.first_line)
    try:
        t = sample(pystack, [p.pid], 5, "--children", "-F", "199")
    finally:
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
    samples = by_pid(t.events("py_stack"))
    for k in kids:
        assert samples.get(k), "no samples of child %d: %s" % (k, t.stderr)
        assert all(e["leaf_func"] == "child_work" for e in samples[k])


def test_usage_errors():
    for args in (["-F", "0", "-p", "1"], ["--max-depth", "999", "-p", "1"], ["--children"],
                 ["--per-thread", "-p", "1"]):
        res = run([tool_path("pystack")] + args, check=False)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.startswith("pystack: "), res.stderr


def test_samples_without_frames_are_counted_not_printed(pystack):
    """At exit the interpreter frees its objects after the last frame returned: those
    samples are no Python stacks (no py_stack record, counted as no_frames)."""
    script = os.path.join(TARGETS, "py_exit_freeing.py")
    p = subprocess.Popen(["/usr/bin/python3.11", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == b"ready"
        t = pystack([p.pid], "-F", "499")
        cpu0 = cpu = cpu_seconds(p.pid)
        p.stdin.close()  # from here on it only frees memory, with no frame on its stack
        deadline = time.time() + 60
        while p.poll() is None and time.time() < deadline:
            cpu = cpu_seconds(p.pid) if os.path.exists("/proc/%d/stat" % p.pid) else cpu
            time.sleep(0.01)
        p.wait(timeout=60)
        t.stop()
    finally:
        if p.poll() is None:
            p.kill()
    assert t.returncode == 0, t.stderr
    freeing = cpu - cpu0
    stacks = [e for e in t.events("py_stack") if e["pid"] == p.pid]
    for e in stacks:
        assert e["stack_depth"] > 0 and e["leaf_file"] and e["leaf_line"] > 0, e
    [summary] = t.events("pystack_summary")
    assert summary["python_stacks"] == len(stacks)
    # the freeing took CPU the kernel accounted: a good share of its 499 Hz samples
    assert freeing > 0.1, "the target freed too fast to judge (%.2f s)" % freeing
    assert summary["no_frames"] >= 0.3 * freeing * 499, (summary, freeing)
    assert summary["samples"] == (summary["python_stacks"] + summary["idle"]
                                  + summary["no_frames"] + summary["errors"])


def test_target_that_exited_is_said_so(pythons):
    """A target that has exited but is not reaped yet (a zombie: its pid still exists,
    its maps are empty) is said to have exited, not to be "no CPython"."""
    cmd = supported(pythons).get("debian-3.11") or next(iter(supported(pythons).values()))
    p = subprocess.Popen(cmd + ["-c", "pass"])
    try:
        deadline = time.time() + 30
        while time.time() < deadline:  # exited, not reaped: Popen.poll() would reap it
            with open("/proc/%d/stat" % p.pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        res = run([tool_path("pystack"), "-p", str(p.pid), "-d", "1"], check=False)
    finally:
        p.wait()
    assert res.returncode == 1
    assert "pystack: warning: pid %d exited before it could be traced: skipped" % p.pid in res.stderr, res.stderr
    assert "pystack: no -p pid is left to trace" in res.stderr
    assert "no CPython" not in res.stderr and "/maps" not in res.stderr


def test_without_pid_every_cpython_of_the_host(pystack, pythons, targets, tmp_path):
    """No -p: every CPython process of the host is sampled, also one started after
    pystack, and each row of the top table names its process. Two spinning targets
    of different builds, each in a function of its own file: every row of a
    function is its process's pid."""
    builds = supported(pythons)
    early_cmd = builds.get("debian-3.11") or next(iter(builds.values()))
    late_cmd = builds.get("pyenv-3.12") or early_cmd
    files = {}
    for tag in ("early", "late"):
        files[tag] = str(tmp_path / ("spin_%s.py" % tag))
        with open(files[tag], "w") as f:
            f.write("import sys\nsys.stdout.write('ready\\n'); sys.stdout.flush()\n"
                    "def spin_%s():\n    while True:\n        pass\nspin_%s()\n" % (tag, tag))
    early = targets.start(early_cmd + [files["early"]])
    t = pystack([], "-d", "600", json_mode=False)
    assert "Sampling every CPython process" in t._stderr()
    late = targets.start(late_cmd + [files["late"]])
    time.sleep(6)  # found within a second, then sampled
    t.stop()
    assert t.returncode == 0, t.stderr
    assert "pid %d: CPython" % late.pid in t.stderr
    rows = {}
    for line in t.stdout.splitlines()[1:]:
        m = re.match(r"\s*[\d.]+%\s+[\d.]+%\s+(\d+)\s+(\d+)\s+(\d+)  (\S+) \((.*):(\d+)\)$", line)
        assert m, line
        rows.setdefault((m.group(4), m.group(5)), set()).add(int(m.group(3)))
    assert t.stdout.splitlines()[0].split() == ["%OWN", "%TOTAL", "OWN", "TOTAL", "PID", "FUNCTION",
                                                "(FILE:LINE)"]
    assert rows.get(("spin_early", files["early"])) == {early.pid}, rows
    assert rows.get(("spin_late", files["late"])) == {late.pid}, rows
