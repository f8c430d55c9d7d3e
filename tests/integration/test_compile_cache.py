"""The compile cache (pyebpf(7), Compiles): a second start loads the programs the first
one compiled, and they trace the same; a cache someone else could have written is not
used. Ground truth: the target's own busy line (py_busyline.py), and the kernel's list
of maps (new, empty maps at each start)."""
import os
import stat
import subprocess

import pytest

from conftest import TARGETS, Tool

PY = "/usr/bin/python3"
BUSY = os.path.join(TARGETS, "py_busyline.py")


@pytest.fixture
def busy():
    p = subprocess.Popen([PY, BUSY], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    yield p.pid
    p.kill()
    p.wait()


def traced(name, pid, cache, *args):
    """name run for 2 s on pid with PYEBPF_CACHE_DIR=cache and -v: (its samples of the
    busy line, its stderr)."""
    tool = Tool(name, ["-p", str(pid), "-v", "-d", "2"] + list(args),
                env=dict(os.environ, PYEBPF_CACHE_DIR=cache)).wait_ready()
    tool.proc.wait(timeout=120)
    tool.stop()
    assert tool.returncode == 0, tool.stderr[-3000:]
    spins = [e for e in tool.events("py_stack") if e["pid"] == pid and
             e["stack"].endswith("spin (%s:%d)" % (BUSY, busy_line()))]
    return spins, tool.stderr


def busy_line():
    with open(BUSY) as f:
        return next(i for i, l in enumerate(f, 1) if "BUSY" in l and "while" in l)


def test_second_start_loads_what_the_first_compiled(busy, tmp_path):
    cache = str(tmp_path / "cache")
    first, err1 = traced("pystack", busy, cache, "-F", "99")
    second, err2 = traced("pystack", busy, cache, "-F", "99")
    print(len(first), len(second))
    # "a BPF program of ... compiled in N ms (process PID)", or "... from the compile cache"
    assert "ms (process" in err1 and "from the compile cache" not in err1
    assert "from the compile cache" in err2 and "ms (process" not in err2
    # 2 s at 99 Hz of a spinning thread: the cached programs sample as the compiled ones
    assert len(first) > 100 and len(second) > 100
    assert abs(len(first) - len(second)) < 0.25 * len(first)
    files = os.listdir(cache)
    assert len(files) == 1 and files[0].endswith(".bpfobj")
    st = os.stat(os.path.join(cache, files[0]))
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700 and stat.S_IMODE(st.st_mode) == 0o600


def test_pymonitor_starts_every_tracker_from_the_cache(busy, tmp_path):
    cache = str(tmp_path / "cache")
    _, err1 = traced("pymonitor", busy, cache)
    spins, err2 = traced("pymonitor", busy, cache)
    compiled = err1.count("ms (process")
    assert compiled >= 8, err1[-3000:]
    assert err2.count("from the compile cache") == compiled and "ms (process" not in err2
    assert len(spins) > 100
    assert len(os.listdir(cache)) == compiled


def test_a_cache_others_can_write_is_not_used(busy, tmp_path):
    cache = str(tmp_path / "cache")
    traced("pystack", busy, cache, "-F", "99")
    os.chmod(cache, 0o777)
    spins, err = traced("pystack", busy, cache, "-F", "99")
    assert "not using the compile cache %s" % cache in err
    assert "ms (process" in err and "from the compile cache" not in err and len(spins) > 100
    os.chmod(cache, 0o700)
    name = os.path.join(cache, os.listdir(cache)[0])
    os.chmod(name, 0o660)
    spins, err = traced("pystack", busy, cache, "-F", "99")
    assert "ms (process" in err and "from the compile cache" not in err and len(spins) > 100
    # compiled again, and stored again, its own way
    assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
