"""Pictures of pystack's profile (-o FILE, --top) read by the programs people open them
with, against the target's own timing: the SVG flame graph rendered by Debian's
chromium (headless, through playwright-core), the speedscope file in speedscope's own
page, the pprof file through `go tool pprof`, the live view under tmux.

The target, tests/targets/py_split.py, has a() and b() call the same work() with 70k
and 30k iterations and measures its own split (time.thread_time): the ground truth.
One run of three pystacks (one per file format) samples the same window of it.
npm packages go to BUILD/npm (installed by the first test that needs them).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, TARGETS, Tool, run, sample_timed_target

PYTHON = "/usr/bin/python3"
HZ = 999  # the target may get a tenth of a CPU here: enough samples for ±3 points
PERIOD_NS = 1000000000 // HZ
BROWSER_JS = os.path.join(ROOT, "tests", "integration", "pictures_browser.mjs")
NPM_DIR = os.path.join(BUILD, "npm")
ARTIFACTS = os.path.join(BUILD, "test-artifacts")
ROW_RE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+(?:\d+\s+)?(.*) \((.*):(\d+)\)$")  # [PID] FUNCTION


def table_rows(text):
    """pystack's top table: {qualname: (own, total, own_pct, total_pct)}."""
    out = {}
    for line in text.splitlines():
        m = ROW_RE.match(line)
        if m:
            out[m.group(5)] = (int(m.group(3)), int(m.group(4)), float(m.group(1)), float(m.group(2)))
    return out


def node_modules():
    """playwright-core and speedscope from the npm registry, once per build dir."""
    mods = os.path.join(NPM_DIR, "node_modules")
    if not all(os.path.isdir(os.path.join(mods, m)) for m in ("playwright-core", "speedscope")):
        if not shutil.which("npm"):
            pytest.skip("npm is not installed (make deps installs it)")
        os.makedirs(NPM_DIR, exist_ok=True)
        res = run(["npm", "install", "--no-audit", "--no-fund", "--prefix", NPM_DIR,
                   "playwright-core@1", "speedscope@1"], check=False, timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
    return mods


def browser(*args):
    res = run(["node", BROWSER_JS] + list(args), check=False, timeout=180,
              env=dict(os.environ, NODE_PATH=node_modules()))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """The three files, the tables printed with them, and the target's own split."""
    tmp = tmp_path_factory.mktemp("pictures")
    files = {fmt: str(tmp / ("prof" + suffix)) for fmt, suffix in
             (("svg", ".svg"), ("speedscope", ".speedscope.json"), ("pprof", ".pb.gz"))}
    args = {fmt: ["-o", path] for fmt, path in files.items()}
    args.update(folded=["-f"], lines=["-f", "--lines"], top=["--top"])  # --top: stdout is a file
    truth, tools = sample_timed_target([PYTHON, os.path.join(TARGETS, "py_split.py"), "--wait"],
                                       {name: ["-F", str(HZ)] + a for name, a in args.items()}, 20)
    split = {"a": truth["a"] / (truth["a"] + truth["b"]), "b": truth["b"] / (truth["a"] + truth["b"])}
    print("target's own split: a %.1f%%, b %.1f%%" % (100 * split["a"], 100 * split["b"]))
    return {"files": files, "tables": {f: table_rows(t.stdout) for f, t in tools.items()}, "split": split,
            "stdout": {f: t.stdout for f, t in tools.items()}}


def def_line(func):
    with open(os.path.join(TARGETS, "py_split.py")) as f:
        return next(i for i, l in enumerate(f, 1) if l.startswith("def %s(" % func))


def test_folded_frames_are_functions_unless_lines(profiles):
    """-f folds by function: work() is one frame, at its def line, whatever line it was
    on; --lines keeps the line it was on: the loop's body, or the def line itself for a
    sample at the function's first instruction (CPython gives that one the def line)."""
    def work_lines(text):
        found = set()
        for stack in text.splitlines():
            for frame in stack.rsplit(" ", 1)[0].split(";"):
                m = re.match(r"^work \(.*py_split\.py:(\d+)\)$", frame)
                if m:
                    found.add(int(m.group(1)))
        return found

    line = def_line("work")
    assert work_lines(profiles["stdout"]["folded"]) == {line}, profiles["stdout"]["folded"]
    body = work_lines(profiles["stdout"]["lines"])
    assert body - {line} and all(line <= n <= line + 4 for n in body), (line, profiles["stdout"]["lines"])


def test_top_without_a_terminal_prints_tables(profiles):
    """--top with stdout not a tty: the table every second (each counting afresh), no
    escape sequences."""
    out = profiles["stdout"]["top"]
    assert "\033" not in out
    tables = [table_rows(t) for t in out.split("%OWN")[1:]]
    assert len(tables) >= 15, out[-3000:]
    # (a sample may catch the target reading its "go" line: a stdlib frame or two)
    assert {"<module>", "a", "b", "work"} <= set().union(*tables), out[-2000:]
    # afresh: the tables add up to about what the -o svg run sampled in the same window
    # (they started within seconds of each other); counted up, they would add up to ~10x
    svg = sum(own for own, _, _, _ in profiles["tables"]["svg"].values())
    added = sum(own for t in tables for own, _, _, _ in t.values())
    assert 0.5 * svg < added < 1.5 * svg, (added, svg)


def test_svg_flame_graph_in_chromium(profiles):
    """Widths are the target's shares (±3 points) and the table's counts; search
    highlights work() and says its share; a click zooms a() to the full width; the
    tooltip says samples and percent; the user's file is in warm colours."""
    svg = profiles["files"]["svg"]
    table = profiles["tables"]["svg"]
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "pystack-flamegraph.png")
    page = browser("svg", svg, shot, "^work ", "a")
    assert not page["errors"], page["errors"]
    frames = page["frames"]
    full = [f for f in frames if f["label"] == "all"][0]["width"]
    assert abs(full - 1180) < 0.01, full
    samples = sum(own for own, _, _, _ in table.values())

    def named(func):
        return [f for f in frames if f["label"].startswith(func + " (")]

    # the target times a() and b() only: shares of their sum (the samples in <module>'s
    # own loop, 1-2%, are in neither)
    both = sum(f["width"] for func in ("a", "b") for f in named(func))
    for func in ("a", "b"):
        (f,) = named(func)
        share = f["width"] / both
        print("%s: width %.1f%%, target %.1f%%, table %.1f%%" % (
            func, 100 * share, 100 * profiles["split"][func], table[func][3]))
        assert abs(share - profiles["split"][func]) <= 0.03, (func, share, profiles["split"])
        assert abs(f["width"] / full - table[func][1] / samples) < 0.0005, (func, f, table[func])
        assert "%d samples (%.2f%%)" % (table[func][1], 100.0 * table[func][1] / samples) in f["title"]
        r, g, b = (int(f["fill"][i:i + 2], 16) for i in (1, 3, 5))
        assert r >= 225 and r > g > b, f["fill"]  # the user's code: warm
    works = named("work")
    assert len(works) == 2  # under a() and under b(): one frame each, by function
    assert abs(sum(f["width"] for f in works) / full - table["work"][1] / samples) < 0.001
    assert sorted(page["highlighted"]) == sorted(f["label"] for f in works)
    assert page["matched"] == "Matched: %.2f%%" % (100 * sum(f["width"] for f in works) / full)
    (zoomed,) = page["zoomed"]
    assert abs(zoomed["width"] - 1180) < 0.01, zoomed
    assert re.match(r"^<module> \(.*py_split\.py:1\): \d+ samples \(100\.00%\)$", page["details"]), page["details"]
    assert os.path.getsize(shot) > 10000
    print("screenshot:", shot)


def test_speedscope_file_in_speedscope(profiles, tmp_path):
    """speedscope's page (from its npm package) loads the file: its sandwich table has
    pystack's functions with the table's samples times the period; the file has one
    profile per thread and its weights add up to the samples."""
    path = profiles["files"]["speedscope"]
    table = profiles["tables"]["speedscope"]
    with open(path) as f:
        doc = json.load(f)
    names = {fr["name"] for fr in doc["shared"]["frames"]}
    assert names == set(table), (names, table)
    assert all(fr["file"].endswith("py_split.py") and fr["line"] == def_line(fr["name"])
               for fr in doc["shared"]["frames"] if fr["name"] in ("a", "b", "work"))
    (prof,) = doc["profiles"]  # one thread
    assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds" and prof["name"] == "MainThread"
    assert sum(prof["weights"]) == sum(own for own, _, _, _ in table.values()) * PERIOD_NS

    site = tmp_path / "site"
    shutil.copytree(os.path.join(node_modules(), "speedscope", "dist", "release"), site)
    shutil.copy(path, site / "p.speedscope.json")
    port = 20000 + os.getpid() % 20000
    server = subprocess.Popen([PYTHON, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=site,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        base = "http://127.0.0.1:%d/" % port
        page = browser("speedscope", base + "index.html#profileURL=" + base + "p.speedscope.json&view=sandwich",
                       os.path.join(str(tmp_path), "speedscope.png"))
    finally:
        server.kill()
        server.wait()
    assert not page["errors"], page["errors"]
    # rows: total, self, name (speedscope shows times with 3 to 5 significant digits)
    cells = [c.strip() for c in page["text"].split("Symbol Name", 1)[1].split("\n") if c.strip()]
    shown = {cells[i + 2]: (cells[i], cells[i + 1]) for i in range(0, len(cells) - 2, 3)}
    assert set(shown) == set(table), (shown, table)
    for func, (total, own) in shown.items():
        m = re.match(r"([\d.]+)(ns|µs|ms|s) ", total)
        assert m, total
        seconds = float(m.group(1)) * {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1}[m.group(2)]
        expect = table[func][1] * PERIOD_NS / 1e9
        assert abs(seconds - expect) <= 0.006 * expect + 0.005, (func, total, expect)


def test_pprof_top_equals_the_table(profiles):
    """go tool pprof reads the file: its -top (flat, cum) is pystack's table (own, total),
    function by function; the second sample type is CPU nanoseconds."""
    path = profiles["files"]["pprof"]
    table = profiles["tables"]["pprof"]
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go)")
    env = dict(os.environ, HOME=os.environ.get("HOME", "/root"), GOFLAGS="-mod=mod")
    # -symbolize=none: pprof would shorten "<module>" as a C++ template otherwise;
    # -nodefraction=0: it would leave out functions under 0.5% of the samples
    res = run(["go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", "-top", path], env=env, timeout=300)
    rows = {}
    for line in res.stdout.splitlines():
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$", line)
        if m:
            rows[m.group(3).strip()] = (int(m.group(1)), int(m.group(2)))
    assert "Type: samples" in res.stdout, res.stdout
    assert rows == {f: (v[0], v[1]) for f, v in table.items()}, (res.stdout, table)
    res = run(["go", "tool", "pprof", "-symbolize=none", "-sample_index=cpu", "-raw", path], env=env, timeout=300)
    assert "samples/count" in res.stdout and "cpu/nanoseconds" in res.stdout, res.stdout
    pairs = re.findall(r"^\s+(\d+)\s+(\d+): ", res.stdout, re.M)
    assert pairs and all(int(ns) == int(n) * PERIOD_NS for n, ns in pairs), res.stdout


def test_top_live_view_under_tmux(tmp_path):
    """pystack --top in a tmux pane: a() and b() lead the TOTAL column with the target's
    shares (±3 points); q, then Ctrl-C in a second run (on a second target), end it with
    the terminal as it was (stty -a before and after) and the final table on the main
    screen."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed (make deps installs it)")
    split = [os.path.join(TARGETS, "py_split.py")]
    first = subprocess.Popen([PYTHON] + split + ["--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    # the second target waits (--wait) so as not to take CPU from the first one's samples
    second = subprocess.Popen([PYTHON] + split + ["--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    session = "top"
    # a server of its own: tests of other checkouts may use tmux (and kill its server)
    tmux = ["tmux", "-S", str(tmp_path / "tmux.sock")]
    # bash: Ctrl-C reaches the shell too, and dash would die of it even when pystack
    # handles it and exits 0 (bash waits to see how its child ended)
    script = tmp_path / "run.sh"
    cmd = "%s -p %%d -F 999 --top 2>/dev/null" % os.path.join(BUILD, "pystack")
    # the second run waits for a line: started at once, its screen would hide "exit1="
    script.write_text("stty -a > %s/before\n%s\necho exit1=$?\nstty -a > %s/after1\nread -r _\n%s\n"
                      "echo exit2=$?\nstty -a > %s/after2\nsleep 3600\n" % (tmp_path, cmd % first.pid, tmp_path,
                                                                            cmd % second.pid, tmp_path))

    def pane():
        return run(tmux + ["capture-pane", "-p", "-t", session]).stdout

    def wait_for(text, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            shown = pane()
            if text in shown:
                return shown
            time.sleep(0.5)
        raise AssertionError("no %r in the pane:\n%s" % (text, pane()))

    try:
        assert first.stdout.readline().strip() == b"ready"
        assert second.stdout.readline().strip() == b"ready"
        run(tmux + ["new-session", "-d", "-s", session, "-x", "150", "-y", "30", "bash %s" % script])
        wait_for("pystack --top:")
        first.stdin.write(b"go\n")
        first.stdin.flush()
        time.sleep(15)
        live = pane()
        run(tmux + ["send-keys", "-t", session, "q"])
        after_q = wait_for("exit1=")
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
        second.stdin.write(b"go\n")
        second.stdin.flush()
        wait_for("exit1=")  # stty has run too once the line it waits for is taken
        deadline = time.time() + 60
        while not (tmp_path / "after1").exists() or not (tmp_path / "after1").read_text():
            assert time.time() < deadline, "stty did not write after1 within 60 s"
            time.sleep(0.1)
        run(tmux + ["send-keys", "-t", session, "Enter"])
        wait_for("pystack --top:")
        run(tmux + ["send-keys", "-t", session, "C-c"])
        after_c = wait_for("exit2=")
    finally:
        run(tmux + ["kill-server"], check=False)
        for p in (first, second):
            if p.poll() is None:
                p.kill()
                p.wait()
    truth = json.loads(out.decode().strip().splitlines()[-1])
    rows = table_rows(live)
    print(live)
    assert live.splitlines()[0].startswith("pystack --top:"), live
    ranked = sorted(rows, key=lambda f: -rows[f][1])
    assert ranked[:4] == ["<module>", "work", "a", "b"], live  # by TOTAL: the two hot callers lead after them
    for func in ("a", "b"):  # shares of a() + b(), as the target times them
        share = truth[func] / (truth["a"] + truth["b"])
        shown = rows[func][3] / (rows["a"][3] + rows["b"][3])
        assert abs(shown - share) <= 0.03, (func, rows[func], share)
    assert "exit1=0" in after_q and "exit2=0" in after_c, (after_q, after_c)
    assert "%OWN" in after_q.split("exit1=")[0]  # the final table, on the main screen
    before = (tmp_path / "before").read_text()
    assert (tmp_path / "after1").read_text() == before
    assert (tmp_path / "after2").read_text() == before


def test_pygc_pprof_weighs_stacks_by_pause(run_tool, tmp_path):
    """pygc -o FILE.pb.gz: the target's 5 explicit collections are 5 collections of
    collect_here() in pprof, and the pause sample type adds up to the pauses pygc
    reported (end_ns - start_ns of each gc_pause record)."""
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go)")
    path = str(tmp_path / "gc.pb.gz")
    target = subprocess.Popen([PYTHON, os.path.join(TARGETS, "gc_stack.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        tool = run_tool("pygc", "-p", str(target.pid), "-g", "1", "-o", path)
        target.stdin.write("go\n")
        target.stdin.flush()
        target.stdout.readline()
        time.sleep(0.3)
        tool.stop()
    finally:
        target.kill()
        target.wait()
    assert tool.returncode == 0, tool.stderr
    pauses = tool.events("gc_pause")
    assert sum(1 for e in pauses if e["stack"][-1].startswith("collect_here (")) == 5, pauses
    env = dict(os.environ, HOME=os.environ.get("HOME", "/root"))
    res = run(["go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", "-sample_index=collections", "-top", path],
              env=env, timeout=300)
    flat = {m.group(2).strip(): int(m.group(1)) for m in
            re.finditer(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+)$", res.stdout, re.M)}
    assert flat.get("collect_here") == 5, res.stdout
    res = run(["go", "tool", "pprof", "-symbolize=none", "-raw", path], env=env, timeout=300)
    assert "collections/count" in res.stdout and "pause/nanoseconds" in res.stdout, res.stdout
    pairs = re.findall(r"^\s+(\d+)\s+(\d+): ", res.stdout, re.M)
    assert sum(int(n) for n, _ in pairs) == len(pauses), res.stdout
    assert sum(int(ns) for _, ns in pairs) == sum(e["end_ns"] - e["start_ns"] for e in pauses), res.stdout


# ---- pyoffcpu and pygil: -o FILE of the tools that weigh stacks by time ----

from test_pygil import WORKLOAD, Workload, in_spin, python_cmd, pythons  # noqa: E402,F401 (pythons: a fixture)
from test_pyoffcpu import SCRIPT as OFFCPU_SCRIPT, run_window, stopped  # noqa: E402
from test_pystack import Targets  # noqa: E402


def go_pprof(path, *args):
    env = dict(os.environ, HOME=os.environ.get("HOME", "/root"), GOFLAGS="-mod=mod")
    # -symbolize=none: pprof would shorten "<module>" as a C++ template otherwise;
    # -nodefraction=0: it would leave out functions under 0.5% of the samples
    return run(["go", "tool", "pprof", "-symbolize=none", "-nodefraction=0"] + list(args) + [path], env=env,
               timeout=300).stdout


def pprof_top(path, index, unit=None):
    """go tool pprof -top of one sample type: (its total, {function: cum}, the output)."""
    out = go_pprof(path, "-sample_index=" + index, *(["-unit=" + unit] if unit else []), "-top")
    suffix = unit or ""
    m = re.search(r"of (\d+)%s total" % suffix, out)
    assert m, out
    cum = {m.group(2).strip(): int(m.group(1)) for m in re.finditer(
        r"^\s*\S+\s+[\d.]+%%\s+[\d.]+%%\s+(\d+)%s\s+[\d.]+%%\s+(.+)$" % suffix, out, re.M)}
    return int(m.group(1)), cum, out


def folded_lines(text):
    """[(stack, value)] of folded text."""
    out = []
    for line in text.splitlines():
        if line.strip():
            stack, _, n = line.rpartition(" ")
            out.append((stack, int(n)))
    return out


def function_lines(path, func):
    """The lines of func's body in path (def line to the next blank line)."""
    with open(path) as f:
        lines = f.read().split("\n")
    first = next(i for i, l in enumerate(lines, 1) if l.startswith("def %s(" % func))
    last = next(i for i in range(first, len(lines) + 1) if not lines[i - 1].strip())
    return set(range(first, last))


def svg_frames(path, shot, search, zoom):
    """The SVG in chromium: (page, its frames, the full width); no script error."""
    if not os.path.exists("/usr/bin/chromium"):
        pytest.skip("chromium is not installed (make deps installs it)")
    page = browser("svg", path, shot, search, zoom)
    assert not page["errors"], page["errors"]
    full = [f for f in page["frames"] if f["label"] == "all"][0]["width"]
    assert abs(full - 1180) < 0.01, full
    return page, page["frames"], full


def stop_all(tools):
    """SIGINT to all at once (they end on the same window), then each one's output."""
    for t in tools.values():
        t.proc.send_signal(signal.SIGINT)
    for t in tools.values():
        t.stop()
        assert t.returncode == 0, t.stderr[-2000:]


def kill_all(tools):
    for t in tools.values():
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


@pytest.fixture(scope="module")
def offcpu(tmp_path_factory):
    """pyoffcpu's files of one window of tests/targets/py_offcpu.py spin: its spinner
    thread shares its CPU with a hog (preempted about half of the time), its main thread
    sleeps. Four pyoffcpus (one per file, -f, -j and the records' text among them) see
    the same periods: the target is stopped (SIGSTOP) while they start and again before
    they end. The ground truth: each thread's wall time less its on-CPU time
    (/proc/PID/task/TID/schedstat), as in test_pyoffcpu.py."""
    tmp = tmp_path_factory.mktemp("offcpu")
    files = {"svg": str(tmp / "off.svg"), "speedscope": str(tmp / "off.speedscope.json"),
             "pprof": str(tmp / "off.pb.gz"), "folded": str(tmp / "off.txt")}
    extra = {"svg": [], "speedscope": ["-j"], "pprof": ["-f"], "folded": []}
    procs = Targets()
    tools = {}
    try:
        cpu = str(max(os.sched_getaffinity(0)))
        p = procs.start(["taskset", "-c", cpu, "/usr/bin/python3.11", OFFCPU_SCRIPT, "spin"])
        tids = {"spinner": int(p.first_line), "MainThread": p.pid}
        procs.start(["taskset", "-c", cpu, "/usr/bin/python3.11", "-c", "print('ready', flush=True)\nwhile True: pass"])
        os.kill(p.pid, signal.SIGSTOP)
        stopped(p.pid)
        for fmt, path in files.items():
            args = ["-p", str(p.pid), "--min-ms", "0", "-o", path] + [a for a in extra[fmt] if a != "-j"]
            tools[fmt] = Tool("pyoffcpu", args, json_mode="-j" in extra[fmt])
        for t in tools.values():
            t.wait_ready(timeout=600)
        wall, deltas = run_window(p.pid, list(tids.values()))
        stop_all(tools)
    finally:
        kill_all(tools)
        procs.stop_all()
    truth = {n: wall - deltas[tid][0] for n, tid in tids.items()}
    print("wall - on-CPU: %s ms" % {n: round(v / 1e6, 1) for n, v in truth.items()})
    assert truth["spinner"] > 0.2 * wall, truth  # the hog took a good part of its CPU
    return {"files": files, "tools": tools, "truth": truth}


def thread_totals_us(lines):
    out = {}
    for stack, us in lines:
        out[stack.split(";", 1)[0]] = out.get(stack.split(";", 1)[0], 0) + us
    return out


def test_pyoffcpu_pprof_is_its_folded_output(offcpu):
    """pyoffcpu -f -o FILE.pb.gz: go tool pprof's off_cpu total and the spinner() cum are
    the -f lines of the same run (microseconds there, nanoseconds in pprof: each line
    truncated by less than 1 us); the periods are the summary's periods; each thread's
    time is its wall time less its on-CPU time (5%)."""
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go)")
    path = offcpu["files"]["pprof"]
    tool = offcpu["tools"]["pprof"]
    lines = folded_lines(tool.stdout)
    assert lines and all(";" in s for s, _ in lines), tool.stdout[-2000:]
    total_ns, cum_ns, out = pprof_top(path, "off_cpu", "ns")
    assert "Type: off_cpu" in out, out
    raw = go_pprof(path, "-raw")
    assert "periods/count off_cpu/nanoseconds[dflt]" in raw, raw[:2000]
    nsamples = len(re.findall(r"^\s+\d+\s+\d+: ", raw, re.M))
    folded_us = sum(us for _, us in lines)
    spin_us = sum(us for s, us in lines if re.search(r";spinner \(%s:\d+\)" % re.escape(OFFCPU_SCRIPT), s))
    print("pprof %d ns in %d samples; -f %d us in %d lines; spinner() %d ns, -f %d us" % (
        total_ns, nsamples, folded_us, len(lines), cum_ns.get("spinner", 0), spin_us))
    # a line per key of the kernel's table, each truncated; keys of less than 1 us are
    # left out (rare); pprof's samples are the keys' stacks, those of keys that resolve
    # to the same frames merged
    slack = len(lines) + nsamples
    assert 0 <= total_ns / 1000 - folded_us <= slack, (total_ns, folded_us, slack)
    assert 0 <= cum_ns["spinner"] / 1000 - spin_us <= slack, (cum_ns, spin_us)
    periods, _, out = pprof_top(path, "periods")
    assert "Type: periods" in out
    summary = dict(re.findall(r"(\w+)=(\d+)", tool.stderr.rsplit("summary:", 1)[1].splitlines()[0]))
    assert int(summary["folded_dropped"]) == 0, summary
    assert periods == int(summary["long"]), (periods, summary)
    by_thread = thread_totals_us(lines)
    for name, ns in offcpu["truth"].items():
        assert abs(by_thread[name] * 1000 - ns) <= 0.05 * ns, (name, by_thread, offcpu["truth"])


def test_pyoffcpu_svg_widths_are_time_off_the_cpu(offcpu, tmp_path):
    """The SVG in chromium: spinner()'s frames (one per line it was preempted on) are
    its share of the target's time off the CPU, ±3 points of the ground truth's; the
    tooltip and title say milliseconds off_cpu in periods."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "pyoffcpu-flamegraph.png")
    page, frames, full = svg_frames(offcpu["files"]["svg"], shot, "^spinner \\(", "spinner")
    spin = [f for f in frames if f["label"].startswith("spinner (%s:" % OFFCPU_SCRIPT)]
    assert spin, [f["label"] for f in frames]
    share = sum(f["width"] for f in spin) / full
    truth = offcpu["truth"]["spinner"] / sum(offcpu["truth"].values())
    print("spinner(): width %.1f%%, ground truth %.1f%%" % (100 * share, 100 * truth))
    assert abs(share - truth) <= 0.03, (share, truth)
    assert all(re.search(r"\n[\d.]+ ms off_cpu in \d+ periods \([\d.]+%\)", f["title"]) for f in spin), spin
    assert sorted(page["highlighted"]) == sorted(f["label"] for f in spin)
    assert page["zoomed"] and abs(page["zoomed"][0]["width"] - 1180) < 0.01, page["zoomed"]


def test_pyoffcpu_speedscope_weighs_the_records(offcpu):
    """pyoffcpu -j -o FILE.speedscope.json: a profile per thread, in nanoseconds, the
    Python frames with file and line; its weights add up to the off-CPU records the
    same run printed (every period a record, --min-ms 0), to the ground truth and to
    the -f run's lines (2%)."""
    with open(offcpu["files"]["speedscope"]) as f:
        doc = json.load(f)
    tool = offcpu["tools"]["speedscope"]
    profiles = {p["name"]: p for p in doc["profiles"]}
    assert set(profiles) == {"spinner", "MainThread"}, set(profiles)
    assert all(p["type"] == "sampled" and p["unit"] == "nanoseconds" for p in profiles.values())
    lines = function_lines(OFFCPU_SCRIPT, "spinner")
    spin = [fr for fr in doc["shared"]["frames"] if fr["name"] == "spinner"]
    assert spin and all(fr["file"] == OFFCPU_SCRIPT and fr["line"] in lines for fr in spin), spin
    records = tool.events("off_cpu")
    summary = tool.summary()
    assert summary["lost"] == 0 and summary["dropped"] == 0, summary
    for name, p in profiles.items():
        mine = [e["duration_ms"] for e in records if e["thread_name"] == name]
        weight = sum(p["weights"])
        print("%s: speedscope %.3f ms, %d records %.3f ms, truth %.3f ms" % (
            name, weight / 1e6, len(mine), sum(mine), offcpu["truth"][name] / 1e6))
        # duration_ms has 3 decimals: 500 ns a record at most
        assert abs(weight - 1e6 * sum(mine)) <= 1 + 500 * len(mine), (name, weight, sum(mine))
        assert p["endValue"] == weight
        assert abs(weight - offcpu["truth"][name]) <= 0.05 * offcpu["truth"][name]
        # and the -f run's lines on the same periods (each pyoffcpu times them itself)
        folded = thread_totals_us(folded_lines(offcpu["tools"]["pprof"].stdout))[name] * 1000
        assert abs(weight - folded) <= 0.02 * folded, (name, weight, folded)


def test_pyoffcpu_folded_file_is_what_f_prints(offcpu):
    """-o FILE.txt beside the records: -f's lines (thread first, microseconds), with the
    same totals per thread as the -f run over the same periods."""
    with open(offcpu["files"]["folded"]) as f:
        mine = folded_lines(f.read())
    theirs = folded_lines(offcpu["tools"]["pprof"].stdout)
    assert mine and all(s.split(";", 1)[0] in ("spinner", "MainThread") for s, _ in mine), mine
    a, b = thread_totals_us(mine), thread_totals_us(theirs)
    print("-o FILE.txt %s us, -f %s us" % (a, b))
    assert set(a) == set(b)
    for name in a:
        # each pyoffcpu times a period at its own program run: some microseconds apart
        assert abs(a[name] - b[name]) <= 0.02 * b[name], (a, b)
    assert "OFF_MS" in offcpu["tools"]["folded"].stdout  # the usual output, beside the file


@pytest.fixture(scope="module")
def gil(tmp_path_factory, pythons):
    """pygil's files of one run of tests/targets/gil_workload.py cpu2 (two threads in
    spin() taking the GIL from each other): four pygils, one per file (-f, -j and the
    tables' text among them), on the same waits. The ground truth: the target's own
    wall - cpu per thread (its GIL waits, plus at most its run delay)."""
    cmd = python_cmd(pythons, "pyenv-3.13")
    tmp = tmp_path_factory.mktemp("gil")
    files = {"svg": str(tmp / "gil.svg"), "speedscope": str(tmp / "gil.speedscope.json"),
             "pprof": str(tmp / "gil.pb.gz"), "folded": str(tmp / "gil.txt")}
    extra = {"svg": [], "speedscope": ["-j"], "pprof": ["-f"], "folded": []}
    w = Workload(cmd, "cpu2", 3)
    tools = {}
    try:
        for fmt, path in files.items():
            args = ["-p", str(w.pid), "-o", path] + [a for a in extra[fmt] if a != "-j"]
            tools[fmt] = Tool("pygil", args, json_mode="-j" in extra[fmt])
        for t in tools.values():
            t.wait_ready(timeout=600)
        threads = w.go()
        time.sleep(0.5)  # the last records reach the tools
        stop_all(tools)
    finally:
        kill_all(tools)
        w.kill()
    truth = sum(1e9 * (t["wall"] - t["cpu"]) for t in threads.values())
    delay = sum(1e9 * t["run_delay"] for t in threads.values())
    print("wall - cpu %.1f ms, run delay %.1f ms" % (truth / 1e6, delay / 1e6))
    return {"files": files, "tools": tools, "truth": truth, "delay": delay}


def assert_gil_truth(gil, ns):
    assert (gil["truth"] - gil["delay"]) * 0.9 <= ns <= gil["truth"] * 1.1, (ns, gil["truth"], gil["delay"])


def test_pygil_pprof_is_its_folded_output(gil):
    """pygil -f -o FILE.pb.gz: pprof's gil_wait total is the -f lines of the same run
    (there each wait's microseconds truncated: less by under 1 us a wait), 95% or more
    of it under spin(); the waits count matches the -j run's records with a holder
    stack; the total is the target's wall - cpu (10%, less its run delay)."""
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go)")
    path = gil["files"]["pprof"]
    lines = folded_lines(gil["tools"]["pprof"].stdout)
    assert lines, gil["tools"]["pprof"].stderr[-2000:]
    total_ns, cum_ns, out = pprof_top(path, "gil_wait", "ns")
    assert "Type: gil_wait" in out, out
    waits, _, out = pprof_top(path, "waits")
    assert "Type: waits" in out, out
    assert "waits/count gil_wait/nanoseconds[dflt]" in go_pprof(path, "-raw")
    folded_us = sum(us for _, us in lines)
    records = [e for e in gil["tools"]["speedscope"].events("gil_wait") if e["holder_py_stack"] is not None]
    print("pprof %d ns in %d waits, spin() %d ns; -f %d us; -j %d waits" % (
        total_ns, waits, cum_ns.get("spin", 0), folded_us, len(records)))
    assert 0 <= total_ns / 1000 - folded_us <= waits, (total_ns, folded_us, waits)
    assert cum_ns["spin"] >= 0.95 * total_ns, out
    assert abs(waits - len(records)) <= 0.05 * len(records) + 5, (waits, len(records))
    assert_gil_truth(gil, total_ns)


def test_pygil_svg_is_spin(gil):
    """The SVG in chromium: spin()'s frames are 95% or more of the width, as in the
    folded output; the tooltips say milliseconds gil_wait in waits."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "pygil-flamegraph.png")
    page, frames, full = svg_frames(gil["files"]["svg"], shot, "^spin \\(", "spin")
    spin = [f for f in frames if f["label"].startswith("spin (%s:" % WORKLOAD)]
    share = sum(f["width"] for f in spin) / full
    print("spin(): width %.1f%%" % (100 * share))
    assert share >= 0.95, [(f["label"], f["width"]) for f in frames]
    assert all(re.search(r"\n[\d.]+ ms gil_wait in \d+ waits \([\d.]+%\)", f["title"]) for f in spin), spin
    assert sorted(page["highlighted"]) == sorted(f["label"] for f in spin)


def test_pygil_speedscope_weighs_the_waits(gil):
    """pygil -j -o FILE.speedscope.json: its weights are the nanoseconds of the waits
    that run printed with a holder stack (to their rounding), and the -f run's lines
    (2%); spin() has its file and lines."""
    with open(gil["files"]["speedscope"]) as f:
        doc = json.load(f)
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds", prof["type"]
    spin = [fr for fr in doc["shared"]["frames"] if fr["name"] == "spin"]
    lines = function_lines(WORKLOAD, "spin")
    assert spin and all(fr["file"] == WORKLOAD and fr["line"] in lines for fr in spin), spin
    tool = gil["tools"]["speedscope"]
    waited = [e["duration_ms"] for e in tool.events("gil_wait") if e["holder_py_stack"] is not None]
    weight = sum(prof["weights"])
    print("speedscope %.3f ms, %d records %.3f ms" % (weight / 1e6, len(waited), sum(waited)))
    assert len(prof["weights"]) == len(prof["samples"])
    # duration_ms has 3 decimals: 500 ns a record at most
    assert abs(weight - 1e6 * sum(waited)) <= 1 + 500 * len(waited), (weight, sum(waited))
    assert tool.summary()["lost"] == 0
    assert_gil_truth(gil, weight)
    folded = 1000 * sum(us for _, us in folded_lines(gil["tools"]["pprof"].stdout))
    assert abs(weight - folded) <= 0.02 * folded, (weight, folded)  # the -f run on the same waits


def test_pygil_folded_file_is_what_f_prints(gil):
    """-o FILE.txt beside the tables: holder stacks and microseconds as -f prints them,
    the same total (2%) as the -f run on the same waits."""
    with open(gil["files"]["folded"]) as f:
        mine = folded_lines(f.read())
    theirs = folded_lines(gil["tools"]["pprof"].stdout)
    a, b = sum(us for _, us in mine), sum(us for _, us in theirs)
    print("-o FILE.txt %d us, -f %d us" % (a, b))
    assert mine and sum(us for s, us in mine if in_spin(s)) >= 0.95 * a, mine
    assert abs(a - b) <= 0.02 * b, (a, b)
    assert "WAITED_MS" in gil["tools"]["folded"].stdout  # the usual tables, beside the file


@pytest.mark.parametrize("tool", ["pystack", "pyoffcpu", "pygil"])  # pystack's --format once parsed as -p
def test_output_options_as_pystacks(tool, tmp_path):
    """-o and --format as pystack checks them, before anything is traced: --format needs
    -o, a name without a known suffix needs --format, -f still excludes -j, -o does
    not; with --format the name is free."""
    pid = str(os.getpid())
    for args, says in ((["--format", "pprof"], "--format needs -o FILE"),
                       (["-o", str(tmp_path / "x.png")], "say --format"),
                       (["--format", "jpeg", "-o", str(tmp_path / "x")], "--format: svg, speedscope, pprof or folded"),
                       (["-f", "-j", "-o", str(tmp_path / "x.svg")], "-f and -j exclude each other"),
                       (["-o", str(tmp_path / "no" / "x.svg")], "No such file or directory")):
        res = run([os.path.join(BUILD, tool), "-p", pid] + args, check=False, timeout=60)
        assert res.returncode == 2 and says in res.stderr, (args, res.returncode, res.stderr)
    if tool == "pygil":
        res = run([os.path.join(BUILD, tool), "-p", pid, "--no-stacks", "-o", str(tmp_path / "x.svg")],
                  check=False, timeout=60)
        assert res.returncode == 2 and "-o needs the stacks" in res.stderr, res.stderr
    # --ebpf prints the text it would compile: -o and -j together are taken
    res = run([os.path.join(BUILD, tool), "-p", pid, "-j", "--format", "pprof", "-o", str(tmp_path / "x"),
               "--ebpf"], check=False, timeout=60)
    assert res.returncode == 0, res.stderr


def test_pyoffcpu_interval_file_is_the_whole_run(run_tool, tmp_path):
    """pyoffcpu -f -i 1 -o FILE.txt: -f prints each second's sums afresh; the file has
    the whole run's, each stack its lines added up (less than 1 us truncated a line)."""
    procs = Targets()
    path = str(tmp_path / "off.txt")
    try:
        p = procs.start(["/usr/bin/python3.11", OFFCPU_SCRIPT, "sleep", "0.2"])
        t = run_tool("pyoffcpu", "-p", str(p.pid), "-f", "-i", "1", "-o", path, json_mode=False)
        time.sleep(4.5)
        t.stop()
    finally:
        procs.stop_all()
    assert t.returncode == 0, t.stderr
    printed = {}
    for stack, us in folded_lines(t.stdout):
        printed.setdefault(stack, []).append(us)
    with open(path) as f:
        whole = dict(folded_lines(f.read()))
    sleeps = [s for s in printed if re.search(r";sleeper \(%s:\d+\)" % re.escape(OFFCPU_SCRIPT), s)]
    print({s.rsplit(";", 1)[-1]: (printed[s], whole.get(s)) for s in sleeps})
    assert sleeps and max(len(printed[s]) for s in sleeps) >= 3, t.stdout  # one line a second
    assert set(whole) == set(printed), (whole, printed)
    for stack, values in printed.items():
        assert 0 <= whole[stack] - sum(values) <= len(values), (stack, values, whole[stack])


def test_pygil_interval_pprof_is_the_whole_run(run_tool, pythons, tmp_path):
    """pygil -f -i 0.5 -o FILE.pb.gz: pprof's gil_wait total is all the intervals' -f
    lines added up (each wait's microseconds truncated there)."""
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go)")
    cmd = python_cmd(pythons, "pyenv-3.13")
    path = str(tmp_path / "gil.pb.gz")
    w = Workload(cmd, "cpu2", 2.5)
    try:
        t = run_tool("pygil", "-p", str(w.pid), "-f", "-i", "0.5", "-o", path, json_mode=False)
        w.go()
        time.sleep(0.5)
        t.stop()
    finally:
        w.kill()
    assert t.returncode == 0, t.stderr
    lines = folded_lines(t.stdout)
    total_ns, _, _ = pprof_top(path, "gil_wait", "ns")
    waits, _, _ = pprof_top(path, "waits")
    folded_us = sum(us for _, us in lines)
    repeats = max(sum(1 for s, _ in lines if s == stack) for stack, _ in lines)
    print("pprof %d ns in %d waits; -f %d us in %d lines (a stack in up to %d intervals)" % (
        total_ns, waits, folded_us, len(lines), repeats))
    assert repeats >= 3, t.stdout  # the intervals' lines, each counted afresh
    assert 0 <= total_ns / 1000 - folded_us <= waits, (total_ns, folded_us, waits)
