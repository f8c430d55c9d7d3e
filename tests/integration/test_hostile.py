"""pystack, pyoffcpu, pygil and pygc at once on a hostile target (tests/targets/hostile.py):
a CPython that makes its frame chain loop or point at unreadable or random memory,
its code objects' names claim to be huge and its thread list loop, over and over.

Ground truth: the target counts its corruption windows itself, and survives them
(exits 0 with its counts). Every tool must run through it and exit 0, count the bad
walks as errors in its summary, name no frame that the target does not have (every
frame is a function of hostile.py or of the standard library, or a marker such as
"[unknown]"), and keep its memory bounded.

HOSTILE_SECONDS sets how long the tools trace (default 20; the long run: 300);
HOSTILE_PYTHON the interpreter (default Debian's 3.11; hostile.py knows 3.11 and 3.12).
"""
import ast
import json
import os
import re
import subprocess
import time

from conftest import TARGETS, tool_path

SECONDS = float(os.environ.get("HOSTILE_SECONDS", "20"))
PYTHON = os.environ.get("HOSTILE_PYTHON", "/usr/bin/python3.11")  # Debian's: pygc through USDT
HOSTILE = os.path.join(TARGETS, "hostile.py")


def hostile_functions():
    """The names a frame of hostile.py may have: its functions, and each window's huge_name_N."""
    tree = ast.parse(open(HOSTILE).read())
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    return names | {"<module>", "<lambda>"}


FRAME = re.compile(r"^(?P<func>.*?)(?: \((?P<file>.*):(?P<line>\d+)\))?$")


def stdlib_of(python):
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip() + "/"


def bad_frames(stack, allowed, stdlib):
    """The frames of a folded stack string ("a (f:1);b (f:2)") that hostile.py does not have."""
    bad = []
    for part in filter(None, (stack or "").split(";")):
        if part.startswith("["):
            continue  # a marker: [error], [truncated], [unknown: ...], [unknown]
        m = FRAME.match(part)
        func, path = m.group("func"), m.group("file") or ""
        last = func.split(".")[-1]
        if path.endswith("hostile.py"):
            if last not in allowed and not re.fullmatch(r"huge_name_\d+", last):
                bad.append(part)
        elif not (path.startswith(stdlib) or func == "[unknown]"):
            bad.append(part)
    return bad


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def test_four_tools_on_a_hostile_target(run_tool):
    if not os.path.exists(PYTHON):
        import pytest
        pytest.skip("%s is not installed (make deps installs python3.11)" % PYTHON)
    target = subprocess.Popen([PYTHON, HOSTILE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready", target.stderr.read()
        pid = str(target.pid)
        tools = {
            "pystack": run_tool("pystack", "-p", pid),
            "pyoffcpu": run_tool("pyoffcpu", "-p", pid, "--min-ms", "0"),
            "pygil": run_tool("pygil", "-p", pid, "--min-wait-ms", "0.1"),
            "pygc": run_tool("pygc", "-p", pid, "--stack"),
        }
        rss = {name: [] for name in tools}
        end = time.time() + SECONDS
        while time.time() < end:
            assert target.poll() is None, "the hostile target died: " + target.stderr.read()
            for name, t in tools.items():
                assert t.proc.poll() is None, "%s exited early: %s" % (name, t.proc.stderr.read().decode())
                rss[name].append(rss_kb(t.proc.pid))
            time.sleep(1)
        for t in tools.values():
            t.stop(timeout=120)
    finally:
        target.terminate()
        out, err = target.communicate(timeout=60)
    assert target.returncode == 0, err
    windows = json.loads(out.strip().splitlines()[-1])
    print("target windows:", windows)
    assert all(windows[k] > 0 for k in windows), windows

    allowed = hostile_functions()
    stdlib = stdlib_of(PYTHON)
    sums = {}
    for name, t in tools.items():
        assert t.returncode == 0, "%s: exit %s: %s" % (name, t.returncode, t.stderr[-2000:])
        sums[name] = t.summary()
        print(name, "summary:", json.dumps(sums[name]))
    growth = {}
    for name, values in rss.items():
        values = [v for v in values if v]
        # after the first quarter (compiles and caches done) the RSS stays within 30 MB
        settled = values[len(values) // 4:]
        growth[name] = (min(settled), max(settled))
        print(name, "RSS KiB settled min/max:", growth[name], "peak:", max(values))
        assert max(settled) - min(settled) < 30 * 1024, (name, growth[name])

    # pystack: every sample's frames are the target's; the bad walks are errors
    samples = tools["pystack"].events("py_stack")
    assert samples, "pystack printed no samples"
    for s in samples:
        assert not bad_frames(s["stack"], allowed, stdlib), s
    assert sums["pystack"]["errors"] > 0, sums["pystack"]
    # a frame cycle is an error, never a deep (truncated) stack: the stacks here are short
    assert sums["pystack"]["truncated"] == 0, sums["pystack"]
    errors = [s for s in samples if s["status"].startswith("error")]
    assert errors, "no sample says error"
    # a window's stack (a frame in it): some samples meet one, and say so
    in_window = [s for s in samples if "window" in (s["stack"] or "") or "huge_name_" in (s["stack"] or "")]
    assert in_window, "no sample inside a window"

    # pyoffcpu: the same for off-CPU periods
    offs = tools["pyoffcpu"].events("off_cpu")
    assert offs
    for e in offs:
        assert not bad_frames(e.get("py_stack"), allowed, stdlib), e
    assert sums["pyoffcpu"]["py_errors"] > 0, sums["pyoffcpu"]
    assert not [e for e in offs if (e.get("py_status") or "").startswith("truncated")]

    # pygil: waits between the target's threads; stacks of both sides are the target's
    waits = tools["pygil"].events("gil_wait")
    assert waits, "pygil saw no GIL wait"
    for w in waits:
        assert not bad_frames(w.get("waiter_py_stack"), allowed, stdlib), w
        assert not bad_frames(w.get("holder_py_stack"), allowed, stdlib), w
    assert sums["pygil"]["stacks_incomplete"] > 0, sums["pygil"]

    # pygc: collections run only while nothing is corrupted, from collect()
    pauses = tools["pygc"].events("gc_pause")
    assert pauses, "pygc saw no collection"
    for p in pauses:
        stack = ";".join(p.get("stack") or [])
        assert not bad_frames(stack, allowed, stdlib), p
        assert "collect (" in stack, p
