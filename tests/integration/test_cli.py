"""What every tool does with its command line, before it traces anything."""
import os
import socket
import subprocess
import time

import pytest

from conftest import ROOT, help_options, run, tool_path

TOOLS = sorted(f[:-2] for f in os.listdir(os.path.join(ROOT, "tools")) if f.endswith(".c"))
PID_TOOLS = [t for t in TOOLS if ("p", "pid") in help_options(t)]


def test_the_pid_tools_are_found():
    assert {"tcphandshake", "pystack", "pygc"} <= set(PID_TOOLS)


@pytest.mark.parametrize("tool", PID_TOOLS)
@pytest.mark.parametrize("arg", ["", ",", " ", " , "])
def test_an_empty_pid_list_is_a_usage_error(tool, arg):
    """`-p "$(pgrep nosuch)"` must not trace the whole host."""
    r = run([tool_path(tool), "-p", arg, "-d", "1"], check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--pid" in r.stderr and "--help" in r.stderr
    assert r.stdout == ""


def start_ready(args):
    """A tool with stdout on a pipe we hold, once it said it is tracing."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    buf = b""
    deadline = time.time() + 300
    while b"Hit Ctrl-C to end." not in buf and time.time() < deadline and p.poll() is None:
        buf += os.read(p.stderr.fileno(), 4096)
    assert b"Hit Ctrl-C to end." in buf, buf.decode(errors="replace")
    return p, buf


def ends_when_the_reader_goes(p, early, traffic=None):
    """Closes the reading end of the tool's stdout; returns (seconds to exit, rc, stderr)."""
    p.stdout.close()
    t0 = time.time()
    while p.poll() is None and time.time() - t0 < 15:
        if traffic:
            traffic()
        time.sleep(0.05)
    took = time.time() - t0
    if p.poll() is None:
        p.kill()
    err = early + p.stderr.read()
    p.wait()
    return took, p.returncode, err.decode(errors="replace")


def connect_once():
    with socket.socket() as s:
        s.settimeout(1)
        try:
            s.connect(("127.0.0.1", 9))  # nothing listens: refused, one tcp_connect record
        except OSError:
            pass


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "busy"])
def test_a_reader_that_goes_away_ends_the_run_at_once_and_quietly(busy):
    """`tcphandshake | head -1`: the tool ends when head does, with status 0 and no word."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        # quiet: only the connects of a process that makes none; busy: every connect
        args = [tool_path("tcphandshake"), "-j"] + ([] if busy else ["-p", str(sleeper.pid)])
        p, early = start_ready(args)
        took, rc, err = ends_when_the_reader_goes(p, early, connect_once if busy else None)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert took < 5, "still running %.1f s after its reader went away" % took
    assert rc == 0, err
    assert "error" not in err, err
    assert "summary:" in err  # the run ended as runs end: with its summary on stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_a_closed_stdout_is_one_clear_error(tool):
    """`tool >&-`: exit 1 with one message, before the tool opens anything that would become fd 1."""
    pid = ["-p", str(os.getpid())] if tool in PID_TOOLS else []
    r = run(["sh", "-c", 'exec "$0" "$@" -d 1 >&-', tool_path(tool)] + pid, check=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == ["%s: stdout is closed: there is nowhere to write the results" % tool], r.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_a_full_stdout_is_one_clear_error(tool):
    """`tool -j >/dev/full`: results that cannot be written are one message and exit 1."""
    pid = ["-p", str(os.getpid())] if tool in PID_TOOLS else []
    with open("/dev/full", "w") as full:
        r = subprocess.run([tool_path(tool), "-j", "-d", "1"] + pid, stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stderr)
    wrote = [l for l in r.stderr.splitlines() if "could not write" in l]
    assert wrote == ["%s: could not write results to stdout: No space left on device" % tool], r.stderr


@pytest.mark.parametrize("tool", [t for t in TOOLS if t != "hostnet"])
def test_without_privileges_the_one_message_is_the_privileges(tool):
    """Privileges are checked first: no tracefs or header message before the real reason."""
    r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tool_path(tool),
             "-d", "1", "-p", "1"], check=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [
        "%s: needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which holds both) to load BPF "
        "programs and attach them; or run as root" % tool], r.stderr


INTERVAL_TOOLS = [t for t in TOOLS if ("i", "interval") in help_options(t)]


@pytest.mark.parametrize("tool", TOOLS)
def test_a_duration_operand_with_a_fraction_ends_the_run(tool):
    """BCC's habit `profile -p 42 10`: a last operand is the duration, and fractions count.

    pymonitor's -p takes several pids (as the original tool's), so a trailing number is a
    pid there: its duration is -d only, with fractions as everywhere."""
    pid = ["-p", str(os.getpid())] if tool in PID_TOOLS else []
    duration = ["-d", "0.5"] if tool == "pymonitor" else ["0.5"]
    p, early = start_ready([tool_path(tool), "-j"] + pid + duration)
    t0 = time.time()
    out, err = p.communicate(timeout=60)
    took = time.time() - t0
    assert p.returncode == 0, (early + err).decode(errors="replace")
    # from the banner: start-up is not in it; wide margin for a busy host (pymonitor
    # ends its nine trackers' attachments together: ~1.5-2 s of that here, see pymonitor(8))
    assert took < 0.5 + 3
    assert b"summary" in early + err or out


@pytest.mark.parametrize("tool", TOOLS)
def test_a_duration_given_twice_is_a_usage_error(tool):
    r = run([tool_path(tool), "-d", "1", "2"], check=False)
    assert r.returncode == 2 and "duration given twice" in r.stderr, r


def test_the_interval_tools_are_found():
    assert {"pystack", "tcploss", "hostnet"} <= set(INTERVAL_TOOLS)


@pytest.mark.parametrize("tool", INTERVAL_TOOLS)
def test_interval_takes_the_same_seconds_in_every_tool(tool):
    """-i 0.25 is a quarter second everywhere; what is refused is refused in the same words."""
    assert run([tool_path(tool), "-i", "0.25", "--fields"], check=False).returncode == 0
    bad = run([tool_path(tool), "-i", "0", "--fields"], check=False)
    assert bad.returncode == 2
    assert "invalid --interval '0': expected a number from 0.001 to 1e+09" in bad.stderr, bad.stderr
