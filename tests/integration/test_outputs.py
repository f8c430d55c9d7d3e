"""Outputs are never clobbered: a run that fails leaves a file of the output's name byte
for byte as it was (and no temporary file next to it); a run that succeeds replaces it."""
import hashlib
import os
import subprocess
import sys
import time

import pytest

from conftest import tool_path

OLD = b"an earlier profile, precious\n"


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def not_python():
    p = subprocess.Popen(["sleep", "300"])
    yield p.pid
    p.kill()
    p.wait()


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, rc", [(["-d", "1"], 1), (["-d", "1", "--bogus"], 2)])
def test_failed_pystack_leaves_the_svg_as_it_was(tmp_path, not_python, args, rc):
    out = tmp_path / "cpu.svg"
    out.write_bytes(OLD)
    r = run([tool_path("pystack"), "-p", str(not_python), "-o", str(out)] + args)
    assert r.returncode == rc, r.stderr
    assert out.read_bytes() == OLD
    assert sorted(os.listdir(tmp_path)) == ["cpu.svg"]


def test_a_new_name_is_not_created_by_a_failed_run(tmp_path, not_python):
    r = run([tool_path("pystack"), "-p", str(not_python), "-d", "1", "-o", str(tmp_path / "new.svg")])
    assert r.returncode == 1 and os.listdir(tmp_path) == [], (r.stderr, os.listdir(tmp_path))


def test_a_successful_run_replaces_the_file(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "while True: sum(i * i for i in range(1000))"])
    try:
        time.sleep(0.3)
        out = tmp_path / "cpu.svg"
        out.write_bytes(OLD)
        r = run([tool_path("pystack"), "-p", str(target.pid), "-d", "1", "-o", str(out)])
    finally:
        target.kill()
        target.wait()
    assert r.returncode == 0, r.stderr
    assert out.read_bytes().startswith(b"<?xml") and sorted(os.listdir(tmp_path)) == ["cpu.svg"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def sqlite_db(path):
    import sqlite3
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE mine (a INTEGER)")
        c.execute("INSERT INTO mine VALUES (42)")
    return digest(path)


@pytest.mark.parametrize("tool", ["pygc", "pymonitor"])
def test_failed_run_leaves_the_sqlite_database_as_it_was(tmp_path, not_python, tool):
    db = tmp_path / "pyebpf.db"
    before = sqlite_db(db)
    cmd = [tool_path(tool), "-p", str(not_python), "-e", "t", "-d", "1", "--sqlite", str(db)]
    if tool == "pymonitor":
        # pymonitor runs on without a tracker that finds no CPython: make it fail as a
        # deployment would, without the privileges its trackers need
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"] + cmd
        os.chmod(tmp_path, 0o777)
        os.chmod(db, 0o666)
    r = run(cmd)
    assert r.returncode == 1, r.stderr
    assert digest(db) == before
    assert sorted(os.listdir(tmp_path)) == ["pyebpf.db"], os.listdir(tmp_path)


def test_a_database_with_a_misfit_table_is_refused_untouched(tmp_path, not_python):
    import sqlite3
    db = tmp_path / "pyebpf.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE ebpf_gc_pause (a, b)")
    before = digest(db)
    r = run([tool_path("pygc"), "-p", str(not_python), "-e", "t", "-d", "1", "--sqlite", str(db)])
    assert r.returncode == 1
    assert "table ebpf_gc_pause has 2 columns" in r.stderr, r.stderr
    assert digest(db) == before
