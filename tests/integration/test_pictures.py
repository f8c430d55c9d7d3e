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

from conftest import BUILD, ROOT, TARGETS, Tool, run

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
    target = subprocess.Popen([PYTHON, os.path.join(TARGETS, "py_split.py"), "--wait"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tools = []
    try:
        assert target.stdout.readline().strip() == b"ready"
        files = {fmt: str(tmp / ("prof" + suffix)) for fmt, suffix in
                 (("svg", ".svg"), ("speedscope", ".speedscope.json"), ("pprof", ".pb.gz"))}
        args = {fmt: ["-o", path] for fmt, path in files.items()}
        args.update(folded=["-f"], lines=["-f", "--lines"], top=["--top"])  # --top: stdout is a file
        tools = {name: Tool("pystack", ["-p", str(target.pid), "-F", str(HZ)] + a, json_mode=False)
                 for name, a in args.items()}
        for t in tools.values():
            t.wait_ready(timeout=600)
        target.stdin.write(b"go\n")  # the target runs (and times itself) from now on
        target.stdin.flush()
        time.sleep(20)
        for t in tools.values():
            t.proc.send_signal(signal.SIGINT)
        target.send_signal(signal.SIGTERM)
        out, _ = target.communicate(timeout=60)
        for t in tools.values():
            t.stop()
            assert t.returncode == 0, t.stderr[-2000:]
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
        for t in (tools.values() if isinstance(tools, dict) else []):
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait()
    truth = json.loads(out.decode().strip().splitlines()[-1])
    split = {"a": truth["a"] / (truth["a"] + truth["b"]), "b": truth["b"] / (truth["a"] + truth["b"])}
    print("target's own split: a %.1f%%, b %.1f%%" % (100 * split["a"], 100 * split["b"]))
    return {"files": files, "tables": {f: table_rows(t.stdout) for f, t in tools.items()}, "split": split,
            "stdout": {f: t.stdout for f, t in tools.items()}}


def def_line(func):
    with open(os.path.join(TARGETS, "py_split.py")) as f:
        return next(i for i, l in enumerate(f, 1) if l.startswith("def %s(" % func))


def test_folded_frames_are_functions_unless_lines(profiles):
    """-f folds by function: work() is one frame, at its def line, whatever line it was
    on; --lines keeps the line it was on (the loop's body, never the def line)."""
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
    assert body and all(line < n <= line + 4 for n in body), (line, profiles["stdout"]["lines"])


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
    # -symbolize=none: pprof would shorten "<module>" as a C++ template otherwise
    res = run(["go", "tool", "pprof", "-symbolize=none", "-top", path], env=env, timeout=300)
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
    script.write_text("stty -a > %s/before\n%s\necho exit1=$?\nstty -a > %s/after1\n%s\necho exit2=$?\n"
                      "stty -a > %s/after2\nsleep 3600\n" % (tmp_path, cmd % first.pid, tmp_path,
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
    res = run(["go", "tool", "pprof", "-symbolize=none", "-sample_index=collections", "-top", path],
              env=env, timeout=300)
    flat = {m.group(2).strip(): int(m.group(1)) for m in
            re.finditer(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+)$", res.stdout, re.M)}
    assert flat.get("collect_here") == 5, res.stdout
    res = run(["go", "tool", "pprof", "-symbolize=none", "-raw", path], env=env, timeout=300)
    assert "collections/count" in res.stdout and "pause/nanoseconds" in res.stdout, res.stdout
    pairs = re.findall(r"^\s+(\d+)\s+(\d+): ", res.stdout, re.M)
    assert sum(int(n) for n, _ in pairs) == len(pauses), res.stdout
    assert sum(int(ns) for _, ns in pairs) == sum(e["end_ns"] - e["start_ns"] for e in pauses), res.stdout
