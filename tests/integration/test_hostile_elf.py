"""pyoffcpu on a CPython that has loaded (ctypes.CDLL) a hostile shared library, one
way per test: a symbol table of entry size 0 (libbcc 0.26 divides by it: SIGFPE), a
build id of 4000 bytes (its 128-byte hex buffer: a stack smash), a .gnu_debuglink
naming a FIFO beside the library (its open(2) hangs), the library unlinked and a FIFO
put at "PATH (deleted)", the name libbcc opens (a hang), a FIFO as the process's perf
map /tmp/perf-PID.map (a hang). The library's function sleeps with a raw syscall, so
the off-CPU user stacks start inside it and libbcc reads it to name them.

Ground truth: the target says which library it loaded and which Python function waits
in it. The tool must exit 0 within its timeout (a crash or a hang fails the test),
name the Python frames (the waiting function), warn exactly once about the file,
and name the library's function where libbcc may still read the library (debug files
are the only trouble) or leave the native frames as addresses where it may not. A
plain copy of the library is the control: no warning, the function named.
(bccguard.h: what libbcc is kept from; tests/unit/test_bccguard.c: the same files
mapped into a unit test.)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

from conftest import tool_path

PYTHON = "/usr/bin/python3.11"
# seconds before a tool that has not exited counts as hung (a run takes about 8)
TIMEOUT = float(os.environ.get("HOSTILE_ELF_TIMEOUT", "120"))

LIB_C = r"""
#include <sys/syscall.h>
#include <time.h>
/* sleeps ms with the syscall instruction here: a user stack begins in this library */
__attribute__((noinline)) void hostile_block(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
			 : "rcx", "r11", "memory");
}
"""

TARGET = r"""
import ctypes, os, sys, time
lib_path, kind = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(lib_path)
if kind == "deleted_fifo":
    os.unlink(lib_path)
    os.mkfifo(lib_path + " (deleted)")
elif kind == "perf_map_fifo":
    os.mkfifo("/tmp/perf-%d.map" % os.getpid())

def wait_in_lib():
    while True:
        lib.hostile_block(30)

print("ready", flush=True)
wait_in_lib()
"""


def sections(b):
    """Section name -> offset of its ELF64 section header."""
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    stroff, = struct.unpack_from("<Q", b, shoff + shstrndx * shentsize + 0x18)
    out = {}
    for i in range(shnum):
        name, = struct.unpack_from("<I", b, shoff + i * shentsize)
        end = b.index(b"\0", stroff + name)
        out[b[stroff + name:end].decode()] = shoff + i * shentsize
    return out


def build_lib(tmp, kind):
    """The library for kind in tmp: compiled, then made hostile. Its path."""
    src = os.path.join(tmp, "hostile.c")
    with open(src, "w") as f:
        f.write(LIB_C)
    lib = os.path.join(tmp, "libhostile-%s.so" % kind)
    subprocess.run(["cc", "-O1", "-fPIC", "-shared", "-Wl,--build-id", "-o", lib, src], check=True)
    if kind == "debuglink_fifo":
        debug = os.path.join(tmp, "libhostile.debug")
        open(debug, "w").close()
        subprocess.run(["objcopy", "--add-gnu-debuglink=" + debug, lib], check=True)
        os.unlink(debug)
        os.mkfifo(debug)
        return lib
    b = bytearray(open(lib, "rb").read())
    s = sections(b)
    if kind == "entsize0":
        for name in (".dynsym", ".symtab"):
            if name in s:
                struct.pack_into("<Q", b, s[name] + 0x38, 0)
    elif kind == "build_id_long":
        # the note grows over the sections after it (the file is long enough)
        sh = s[".note.gnu.build-id"]
        off, = struct.unpack_from("<Q", b, sh + 0x18)
        assert len(b) > off + 16 + 4000
        struct.pack_into("<I", b, off + 4, 4000)
        struct.pack_into("<Q", b, sh + 0x20, 16 + 4000)
    with open(lib, "wb") as f:
        f.write(b)
    return lib


# kind: (what the tool must do with the library's frames, what the warning says)
CASES = {
    "plain": ("named", None),
    "entsize0": ("addresses", "entry size 0"),
    "build_id_long": ("named", "a build id of 4000 bytes"),
    "debuglink_fifo": ("named", "libhostile.debug, not a regular file"),
    "deleted_fifo": ("addresses", "(deleted): not a regular file"),
    "perf_map_fifo": ("addresses", ".map: not a regular file"),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_hostile_library_neither_crashes_nor_hangs_pyoffcpu(kind):
    if not os.path.exists(PYTHON) or not shutil.which("cc") or not shutil.which("objcopy"):
        pytest.skip("needs %s, cc and objcopy (make deps)" % PYTHON)
    expect, warning = CASES[kind]
    tmp = tempfile.mkdtemp(prefix="hostile-elf-")
    perf_map = None
    target = None
    try:
        lib = build_lib(tmp, kind)
        target = subprocess.Popen([PYTHON, "-c", TARGET, lib, kind], stdout=subprocess.PIPE, text=True)
        assert target.stdout.readline().strip() == "ready"
        perf_map = "/tmp/perf-%d.map" % target.pid
        # a crash is a non-zero exit, a hang the timeout
        try:
            r = subprocess.run([tool_path("pyoffcpu"), "-j", "-p", str(target.pid), "--min-ms", "0", "-d", "3"],
                               capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired as e:
            pytest.fail("pyoffcpu hung on %s: %s" % (kind, (e.stderr or b"")[-2000:]))
        assert r.returncode == 0, "pyoffcpu exit %d on %s: %s" % (r.returncode, kind, r.stderr[-2000:])
    finally:
        if target:
            target.kill()
            target.wait()
        if perf_map and os.path.lexists(perf_map) and kind == "perf_map_fifo":
            os.unlink(perf_map)
        shutil.rmtree(tmp, ignore_errors=True)

    warnings = [l for l in r.stderr.splitlines() if "warning: native frames of pid" in l]
    print(kind, "warnings:", warnings)
    if warning is None:
        assert not warnings, r.stderr
    else:
        assert len(warnings) == 1, r.stderr
        assert warning in warnings[0], warnings[0]
        if kind != "perf_map_fifo":
            assert "libhostile-%s.so" % kind in warnings[0], warnings[0]

    events = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    offs = [e for e in events if e.get("metric") == "off_cpu" and e.get("pid") == target.pid]
    assert len(offs) >= 10, r.stdout[-2000:] + r.stderr[-2000:]
    in_lib = [e for e in offs if "wait_in_lib" in (e.get("py_stack") or "")]
    # the Python frames are named: nearly every wait is in wait_in_lib (30 ms each)
    assert len(in_lib) >= len(offs) // 2, [e.get("py_stack") for e in offs[:5]]
    first = [e["user_stack"][0] for e in in_lib if e.get("user_stack")]
    assert first, in_lib[:3]
    named = [f for f in first if f.startswith("hostile_block [libhostile-")]
    if expect == "named":
        assert len(named) >= len(first) // 2, first[:5]
    else:
        # no symcache for the process: every native frame an address
        assert not named, first[:5]
        assert all(f.startswith("0x") for e in in_lib for f in e["user_stack"]), in_lib[0]["user_stack"]
