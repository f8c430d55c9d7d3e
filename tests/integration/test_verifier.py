"""The stack walker's loops and the kernel verifier (python.bpf.h, PY_LOOP).

Where the kernel has may_goto, the walker's loops are headed by it and the verifier
stops after a few iterations instead of walking all 144 frame steps and 2,048 thread
steps. Ground truths: the kernel's own count of the instructions it verified for each
loaded program (verified_insns in /proc/PID/fdinfo/FD of the tool's program fds), and
the same tool run with the bounded loops (PYEBPF_BOUNDED_LOOPS=1) side by side on the
same targets, which must record the same stacks.
"""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import TARGETS, Tool, tool_path

LOADED_RE = re.compile(r"debug: (\S+): loaded in [0-9.]+ ms, (\d+) instructions, (\d+) verified")
# the walker's programs verified at least 168,000 instructions each with bounded loops
# (pygil's futex exit 994,000 of the verifier's 1,000,000 limit); with may_goto 6,500
# to 28,000 on Linux 6.18
MAY_GOTO_MAX = 60000
BOUNDED_MIN = 150000


def has_may_goto():
    """Whether the tools use may_goto here: the cflag --ebpf prints."""
    out = subprocess.run([tool_path("pystack"), "--ebpf"], capture_output=True, text=True)
    return "// cflag: -DPY_MAY_GOTO" in out.stdout


def verified_insns(pid):
    """{prog_id: verified_insns} of the BPF programs process pid holds (the kernel's count)."""
    out = {}
    fdinfo = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                fields = dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)
        except OSError:
            continue
        if "prog_id" in fields and "verified_insns" in fields:
            out[int(fields["prog_id"])] = int(fields["verified_insns"])
    return out


@pytest.fixture
def target():
    p = subprocess.Popen(["python3", os.path.join(TARGETS, "py_recurse.py"), "40"],
                         stdout=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"ready")
    yield p
    p.kill()
    p.wait()


def start_verbose(name, args, env=None):
    t = Tool(name, ["-v"] + args, json_mode=False, env=env)
    return t.wait_ready()


@pytest.mark.parametrize("tool,args", [("pystack", []), ("pyoffcpu", []), ("pyloop", []),
                                       ("pygil", []), ("pygc", ["--stack"])])
def test_walker_programs_verify_in_few_instructions(tool, args, target):
    """Every program of a walker tool: the kernel verified fewer than MAY_GOTO_MAX
    instructions, and -v says the same counts as the kernel."""
    if not has_may_goto():
        pytest.skip("this kernel has no may_goto: the walker keeps its bounded loops")
    t = start_verbose(tool, args + ["-p", str(target.pid)])
    kernel = verified_insns(t.proc.pid)
    t.stop()
    said = sorted(int(m.group(3)) for m in LOADED_RE.finditer(t.stderr))
    assert kernel and sorted(kernel.values()) == said, (kernel, t.stderr[-3000:])
    assert max(said) < MAY_GOTO_MAX, t.stderr[-3000:]


def test_bounded_loops_are_what_may_goto_saves(target):
    """PYEBPF_BOUNDED_LOOPS=1 gives the bounded loops: the same program verifies more
    than BOUNDED_MIN instructions (the measure tells the two apart)."""
    if not has_may_goto():
        pytest.skip("this kernel has no may_goto: the walker keeps its bounded loops")
    env = dict(os.environ, PYEBPF_BOUNDED_LOOPS="1")
    t = start_verbose("pystack", ["-p", str(target.pid)], env=env)
    kernel = verified_insns(t.proc.pid)
    t.stop()
    assert "bounded loops (no may_goto: PYEBPF_BOUNDED_LOOPS)" in t.stderr, t.stderr[-2000:]
    assert len(kernel) == 1 and min(kernel.values()) > BOUNDED_MIN, (kernel, t.stderr[-2000:])


def pythons():
    """A few interpreters of tests/targets/pythons.sh that cover the walker's layouts."""
    res = subprocess.run([os.path.join(TARGETS, "pythons.sh")], capture_output=True, text=True,
                         timeout=900)
    found = dict(l.split("\t", 1) for l in res.stdout.splitlines() if "\t" in l)
    want = ["pyenv-3.8", "pyenv-3.11", "pyenv-3.12", "sid-3.14"]
    return {n: found[n].split() for n in want if n in found}


def funcs(stack):
    return tuple(re.sub(r" \(.*\)$", "", f) for f in stack.split(";"))


def test_bounded_and_may_goto_walks_agree():
    """Two pystacks at once on the same targets, one with the bounded loops: per target
    the same stacks, truncation and thread names, and the ones the targets make."""
    if not has_may_goto():
        pytest.skip("this kernel has no may_goto: there is only one kind of walk")
    interps = pythons()
    if not interps:
        pytest.skip("pythons.sh found none of pyenv 3.8/3.11/3.12, sid 3.14")
    procs = []
    try:
        for name, cmd in interps.items():
            for script, arg in (("py_recurse.py", "300"), ("py_recurse.py", "60"), ("py_threads.py", None)):
                p = subprocess.Popen(cmd + [os.path.join(TARGETS, script)] + ([arg] if arg else []),
                                     stdout=subprocess.PIPE)
                assert p.stdout.readline(), "%s %s did not start" % (name, script)
                procs.append((name, script, arg, p))
        pids = []
        for _, _, _, p in procs:
            pids += ["-p", str(p.pid)]
        tools = {}
        for kind, env in (("may_goto", None), ("bounded", dict(os.environ, PYEBPF_BOUNDED_LOOPS="1"))):
            tools[kind] = Tool("pystack", pids + ["-F", "199"], env=env)
        for t in tools.values():
            t.wait_ready()
        time.sleep(8)
        for t in tools.values():
            t.stop(signal.SIGINT)
    finally:
        for _, _, _, p in procs:
            p.kill()
            p.wait()
    seen = {}
    for kind, t in tools.items():
        assert t.returncode == 0, t.stderr[-2000:]
        summary = t.summary()
        assert summary["errors"] == 0, summary
        by_pid = {}
        for e in t.events("py_stack"):
            by_pid.setdefault(e["pid"], set()).add((e["status"], e["stack_depth"], funcs(e["stack"]),
                                                    e.get("thread_name")))
        seen[kind] = by_pid
    failures = []
    for name, script, arg, p in procs:
        a, b = seen["may_goto"].get(p.pid, set()), seen["bounded"].get(p.pid, set())
        if script == "py_recurse.py":
            # <module>, rec() DEPTH times, leaf(); past 128 frames the innermost 128
            depth = int(arg)
            if depth + 2 > 128:
                expect = ("truncated", 128, ("[truncated]",) + ("rec",) * 127 + ("leaf",), "MainThread")
            else:
                expect = ("complete", depth + 2, ("<module>",) + ("rec",) * depth + ("leaf",), "MainThread")
            ok = a == b == {expect}
        else:
            names = {"request-handler-%02d-ünï" % i for i in range(10)}
            ok = a == b and {n for _, _, _, n in a} == names
        if not ok:
            failures.append("%s %s %s: may_goto %s, bounded %s" % (name, script, arg or "",
                                                                 sorted(a)[:3], sorted(b)[:3]))
    assert not failures, "\n".join(failures)
