"""Stored profiles read back and differential profiles (issue 27).

The arrangement: py_profile.py runs twice, split (v1) and then split-slow-b (v2, the
"deploy" that makes b() 3x slower), each sampled by a pystack that writes the live folded stacks (-o FILE.txt,
--lines: the stored stacks name the line that ran) and, in the same run, the rows of
the real SQLite sink. Ground truths: the live files (the same samples), the target's
own thread_time per function (the shares before and after), and the construction
(functions on every stack are 100% on both sides).
"""
import calendar
import gzip
import json
import os
import re
import shutil
import sqlite3
import time

import pytest

from conftest import ROOT, TARGETS, run, sample_timed_target, tool_path

PYTHON = "/usr/bin/python3.11"
TARGET = os.path.join(TARGETS, "py_profile.py")
MODE = {"v1": "split", "v2": "split-slow-b"}
HZ = 999  # the target may get a fraction of a CPU here: enough samples for the tolerances
SECONDS = 15
DIFF_RE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+([+-][\d.]+)\s+(.*) \((.*)\)$")


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def sample(version, db, live):
    """py_profile.py in VERSION's mode sampled for SECONDS: (its own timing, pystack's stderr)."""
    args = ["-F", str(HZ), "-e", "fleet", "--lines", "-o", live, "--sqlite", db, "--profile-window", "1"]
    truth, tools = sample_timed_target([PYTHON, TARGET, MODE[version]], {"live": args}, SECONDS)
    return truth, tools["live"].stderr


@pytest.fixture(scope="module")
def deploy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy")
    db = str(tmp / "profiles.db")
    out = {"db": db, "tmp": tmp, "truth": {}, "live": {}, "stderr": {}}
    start = int(time.time())
    for version in ("v1", "v2"):
        live = str(tmp / ("live_%s.txt" % version))
        out["truth"][version], out["stderr"][version] = sample(version, db, live)
        out["live"][version] = live
        if version == "v1":
            # v1's windows (1 s, aligned) all begin before the boundary, v2's after it
            boundary = int(time.time()) + 1
            time.sleep(boundary + 0.2 - time.time())
    out["range"] = {"v1": ["--since", iso(start), "--until", iso(boundary)], "v2": ["--since", iso(boundary)]}
    out["boundary"] = iso(boundary)
    return out


def pystack(*args):
    return run([tool_path("pystack")] + list(args), check=False, timeout=120)


def from_db(deploy, version, *args):
    res = pystack("--from", "sqlite:" + deploy["db"], "-e", "fleet", *(deploy["range"][version] + list(args)))
    assert res.returncode == 0, res.stderr
    return res


def sorted_lines(text):
    return sorted(line for line in text.splitlines() if line.strip())


def shares(truth):
    spent = sum(truth.values())
    return {f: 100.0 * v / spent for f, v in truth.items()}


def diff_rows(text):
    """The text diff: [(function, before, after, delta)] in its order."""
    rows = []
    for line in text.splitlines():
        m = DIFF_RE.match(line)
        if m:
            rows.append((m.group(4), float(m.group(1)), float(m.group(2)), float(m.group(3))))
    return rows


def test_from_reproduces_the_live_folded_stacks_exactly(deploy):
    """--from -f on each run's stored rows prints the very lines the same run wrote with
    -o FILE.txt."""
    for version in ("v1", "v2"):
        got = from_db(deploy, version, "-f").stdout
        with open(deploy["live"][version]) as f:
            live = f.read()
        assert sorted_lines(got) == sorted_lines(live), (version, got, live)
        total = sum(int(l.rsplit(" ", 1)[1]) for l in got.splitlines())
        assert total > 1000, total
    # -o FILE.txt from stored rows: the same lines too
    out = str(deploy["tmp"] / "from_v2.txt")
    from_db(deploy, "v2", "-o", out)
    with open(out) as f, open(deploy["live"]["v2"]) as g:
        assert sorted_lines(f.read()) == sorted_lines(g.read())
    # the rate the rows were sampled at, given with -F: a sample is 1/HZ s in speedscope
    scope_file = str(deploy["tmp"] / "from_v2.speedscope.json")
    from_db(deploy, "v2", "-F", str(HZ), "-o", scope_file)
    with open(scope_file) as f:
        scope = json.load(f)
    assert scope["pyebpf"]["period_ns"] == 1000000000 // HZ, scope["pyebpf"]
    weights = [w for p in scope["profiles"] for w in p["weights"]]
    assert sum(weights) == total * (1000000000 // HZ), (sum(weights), total)


def test_top_table_from_stored_rows_counts_the_stored_samples(deploy):
    """The table of v2's stored rows: each function's TOTAL is the samples of the stored
    stacks it is on, its OWN those it is the leaf of (the live file's stacks)."""
    table = from_db(deploy, "v2").stdout
    with open(deploy["live"]["v2"]) as f:
        stacks = [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1])) for l in f if l.strip()]
    rows = {}
    for line in table.splitlines()[1:]:
        # a frame pystack could not name is "[unknown]", without a place (one in a full run)
        m = re.match(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\d+)\s+(\d+)\s+\d+\s+(\S+)( \(|$)", line)
        assert m, line
        rows[m.group(5)] = (int(m.group(3)), int(m.group(4)))
    for func in ("a", "b", "c", "work", "split"):
        own = sum(n for frames, n in stacks if frames[-1].startswith(func + " ("))
        total = sum(n for frames, n in stacks if any(f.startswith(func + " (") for f in frames))
        assert rows[func] == (own, total), (func, rows, table)


def test_text_diff_names_the_slowed_function_first(deploy):
    """-f against the stored v1 range: b() first, its change within 3 points of the
    target's own timing; a() and c() (their shares fall as b's grows) within 3 points of
    theirs; the functions on every stack unchanged within 1.5. The same against the
    live v1 file as --baseline: the same samples, the same text."""
    stored = pystack("--from", "sqlite:" + deploy["db"], "-e", "fleet", "--since", deploy["boundary"],
                     "--baseline-until", deploy["boundary"], "-f")
    assert stored.returncode == 0, stored.stderr
    filed = from_db(deploy, "v2", "-f", "--baseline", deploy["live"]["v1"])
    assert stored.stdout == filed.stdout
    rows = diff_rows(stored.stdout)
    before, after = shares(deploy["truth"]["v1"]), shares(deploy["truth"]["v2"])
    true = {f: after[f] - before[f] for f in before}
    print(stored.stdout, "true changes:", true)
    assert rows[0][0] == "b", stored.stdout
    got = {name: delta for name, _, _, delta in rows}
    assert abs(got["b"] - true["b"]) <= 3, (got, true)
    assert true["b"] > 15, true  # the deploy did triple b: from ~30% to ~56%
    for f in ("a", "c"):
        assert abs(got[f] - true[f]) <= 3, (f, got, true)
    for f in ("<module>", "split", "work"):
        assert abs(got[f]) <= 1.5, (f, got)
    # sorted by the size of the change
    assert [abs(d) for _, _, _, d in rows] == sorted((abs(d) for _, _, _, d in rows), reverse=True)
    # before and after are the shares of each side's own total
    for name, b, a, d in rows:
        assert abs(a - b - d) <= 0.011, (name, b, a, d)


def folded_counts(path):
    """A folded file's stacks: [(frames, samples)]."""
    with open(path) as f:
        return [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1])) for l in f if l.strip()]


def function_of(frame):
    """A frame by function, as the diff compares them: "f (x.py:12)" -> "f (x.py)"."""
    return re.sub(r":\d+\)$", ")", frame)


def baseline_files(deploy):
    """v1's samples as each of the three files pystack writes: the live run's folded text
    (-o FILE.txt) and its stored rows written as pprof and as speedscope (the same
    samples: test_from_reproduces_the_live_folded_stacks_exactly)."""
    if "baselines" not in deploy:
        files = {"folded": deploy["live"]["v1"]}
        for kind, suffix in (("pprof", ".pb.gz"), ("speedscope", ".speedscope.json")):
            files[kind] = str(deploy["tmp"] / ("v1" + suffix))
            from_db(deploy, "v1", "-o", files[kind])
        deploy["baselines"] = files
    return deploy["baselines"]


def test_baseline_of_each_kind_gives_the_same_diff(deploy):
    """--baseline v1.txt, v1.pb.gz or v1.speedscope.json (the same samples): the same text
    diff, byte for byte, and the same diff SVG. The BEFORE column is the live folded
    file's shares worked out here, and the speedscope file's weights over the period it
    notes are the live file's samples."""
    files = baseline_files(deploy)
    texts, svgs = {}, {}
    for kind, path in files.items():
        texts[kind] = from_db(deploy, "v2", "-f", "--baseline", path).stdout
        svg = str(deploy["tmp"] / ("diff_against_%s.svg" % kind))
        from_db(deploy, "v2", "-o", svg, "--baseline", path)
        with open(svg, "rb") as f:
            svgs[kind] = f.read()
    print(texts["pprof"])
    assert texts["folded"] == texts["pprof"] == texts["speedscope"], texts
    assert svgs["folded"] == svgs["pprof"] == svgs["speedscope"]
    # the ground truth: the live v1 file, read here
    stacks = folded_counts(files["folded"])
    total = sum(n for _, n in stacks)
    assert total > 1000, total
    assert texts["pprof"].startswith("# %d samples before," % total), texts["pprof"][:200]
    rows = diff_rows(texts["pprof"])
    assert len(rows) >= 5, texts["pprof"]
    for name, before, _, _ in rows:
        on = sum(n for frames, n in stacks if name in {function_of(f).split(" (")[0] for f in frames})
        assert abs(before - 100.0 * on / total) <= 0.005 + 1e-9, (name, before, on, total)
    with open(files["speedscope"]) as f:
        scope = json.load(f)
    period = scope["pyebpf"]["period_ns"]
    assert period > 0 and scope["pyebpf"]["count"] == "samples", scope["pyebpf"]
    weights = [w for p in scope["profiles"] for w in p["weights"]]
    assert all(w % period == 0 for w in weights) and sum(weights) // period == total


def pprof_top_diff(before, after):
    """go tool pprof's own difference of the two files: [(function (file), delta points)] in
    its order. -normalize: each side as shares of its total, as ours; -cum: ordered by
    the samples a function is on the stack of (the text diff's measure; the default
    orders by own samples); -filefunctions: functions by name and file, as ours."""
    env = dict(os.environ, HOME=os.environ.get("HOME", "/root"))
    out = run(["go", "tool", "pprof", "-symbolize=none", "-nodefraction=0", "-sample_index=samples", "-normalize",
               "-filefunctions", "-cum", "-top", "-diff_base", before, after], env=env, timeout=300).stdout
    rows = []
    for line in out.splitlines():
        # flat flat% sum% cum cum% function file (the percentages of the difference are unsigned)
        m = re.match(r"^\s*(-?\d+)\s+[\d.]+%\s+[\d.]+%\s+(-?\d+)\s+([\d.]+)%\s+(.+) (\S+)$", line)
        if m:
            sign = -1 if int(m.group(2)) < 0 else 1
            rows.append(("%s (%s)" % (m.group(4), m.group(5)), sign * float(m.group(3))))
    assert rows, out
    return rows, out


def test_go_pprof_diff_base_agrees_with_the_text_diff(deploy):
    """go tool pprof -diff_base v1.pb.gz -top v2.pb.gz (both written by pystack from the
    stored rows): its top 5 are the text diff's top 5 in the same order, each delta the
    same within rounding: the 2 decimals each side prints, and pprof's normalising,
    which rounds each of v2's samples (stacks) scaled to v1's total, up to half a sample
    each."""
    if not shutil.which("go"):
        pytest.skip("go is not installed (make deps installs golang-go, which has go tool pprof)")
    files = baseline_files(deploy)
    after = str(deploy["tmp"] / "v2.pb.gz")
    from_db(deploy, "v2", "-o", after)
    text = from_db(deploy, "v2", "-f", "--baseline", files["pprof"]).stdout
    ours = [("%s (%s)" % (m.group(4), m.group(5)), float(m.group(3))) for m in map(DIFF_RE.match, text.splitlines())
            if m]
    theirs, out = pprof_top_diff(files["pprof"], after)
    print(out)
    before_total = sum(n for _, n in folded_counts(files["folded"]))
    after_stacks = folded_counts(deploy["live"]["v2"])

    def tolerance(func):
        stacks = sum(1 for frames, _ in after_stacks if func in {function_of(f) for f in frames})
        return 0.01 + 100.0 * 0.5 * stacks / before_total

    got = dict(ours)
    top = theirs[:5]
    assert len(top) == 5, out
    for i, (func, delta) in enumerate(top):
        assert func in got, (func, ours)
        assert abs(got[func] - delta) <= tolerance(func), (func, got[func], delta, tolerance(func))
        # the same order: the i-th of ours has the i-th size of change (ties in rounding may swap)
        assert abs(abs(ours[i][1]) - abs(delta)) <= tolerance(func) + tolerance(ours[i][0]), (i, ours[:5], top)
        print("%-60s ours %+7.2f  pprof %+8.3f  (within %.3f)" % (func, got[func], delta, tolerance(func)))
    # the clear changes (b, a, c: apart by more than the rounding) in the very same places
    assert [f for f, _ in ours[:3]] == [f for f, _ in top[:3]], (ours[:5], top)
    assert top[0][0].startswith("b ("), top


def test_env_against_env_is_the_range_diff(deploy, tmp_path):
    """--baseline-env: in a copy of the database v1's rows are env "canary"; -e fleet
    --baseline-env canary (each env's whole range) prints the very text of the range
    diff of the same rows, b() first; the SVG is the same picture. With the profile's
    range the baseline env has nothing: said, exit 1; with a range of its own, the same."""
    copy = str(tmp_path / "envs.db")
    src, dst = sqlite3.connect(deploy["db"]), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    boundary_us = calendar.timegm(time.strptime(deploy["boundary"], "%Y-%m-%dT%H:%M:%SZ")) * 1000000
    moved = dst.execute("UPDATE ebpf_py_stack_profile SET env = 'canary' WHERE time_us < ?", (boundary_us,))
    assert moved.rowcount > 5
    dst.commit()
    dst.close()
    ranged = pystack("--from", "sqlite:" + deploy["db"], "-e", "fleet", "--since", deploy["boundary"],
                     "--baseline-until", deploy["boundary"], "-f")
    assert ranged.returncode == 0, ranged.stderr
    envs = pystack("--from", "sqlite:" + copy, "-e", "fleet", "--baseline-env", "canary", "-f")
    assert envs.returncode == 0, envs.stderr
    assert envs.stdout == ranged.stdout
    rows = diff_rows(envs.stdout)
    before, after = shares(deploy["truth"]["v1"]), shares(deploy["truth"]["v2"])
    assert rows[0][0] == "b" and abs(rows[0][3] - (after["b"] - before["b"])) <= 3, (envs.stdout, before, after)
    svgs = []
    for args in ((deploy["db"], "--since", deploy["boundary"], "--baseline-until", deploy["boundary"]),
                 (copy, "--baseline-env", "canary")):
        svgs.append(str(tmp_path / ("diff%d.svg" % len(svgs))))
        res = pystack("--from", "sqlite:" + args[0], "-e", "fleet", "-o", svgs[-1], *args[1:])
        assert res.returncode == 0, res.stderr
    with open(svgs[0]) as f, open(svgs[1]) as g:
        assert f.read() == g.read()
    empty = pystack("--from", "sqlite:" + copy, "-e", "fleet", "--since", deploy["boundary"],
                    "--baseline-env", "canary", "-f")
    assert empty.returncode == 1 and empty.stdout == "", empty.stderr
    assert "no py_stack samples stored (env canary, since %s" % deploy["boundary"].replace("Z", ".000000Z") \
        in empty.stderr, empty.stderr
    own = pystack("--from", "sqlite:" + copy, "-e", "fleet", "--since", deploy["boundary"],
                  "--baseline-env", "canary", "--baseline-until", deploy["boundary"], "-f")
    assert own.returncode == 0 and own.stdout == ranged.stdout, own.stderr
    # not with a baseline file; only with --from
    both = pystack("--from", "sqlite:" + copy, "-e", "fleet", "--baseline-env", "canary", "--baseline",
                   deploy["live"]["v1"], "-f")
    assert both.returncode == 2 and "not both" in both.stderr, both.stderr
    live = pystack("-p", str(os.getpid()), "--baseline-env", "canary", "-f")
    assert live.returncode == 2 and "need --from" in live.stderr, live.stderr
    # stored stacks are as deep as their run kept them: --max-depth is refused, not ignored
    deep = pystack("--from", "sqlite:" + copy, "-e", "fleet", "--max-depth", "5", "-f")
    assert deep.returncode == 2 and "--max-depth" in deep.stderr and deep.stdout == "", deep.stderr


def path_shares(path, func):
    """{call path by function, ending in func: its share (%) of the folded file's samples}."""
    stacks = folded_counts(path)
    total = sum(n for _, n in stacks)
    out = {}
    for frames, n in stacks:
        funcs = [function_of(f) for f in frames]
        for i, f in enumerate(funcs):
            if f.split(" (")[0] == func:
                out[tuple(funcs[:i + 1])] = out.get(tuple(funcs[:i + 1]), 0) + n
    return {p: 100.0 * n / total for p, n in out.items()}


def test_diff_svg_in_chromium(deploy):
    """-o diff.svg: b's frame is red, a's and c's blue, each tooltip's numbers are the text
    diff's; a call path only in the baseline is listed below the graph; a screenshot is
    kept in the build's test-artifacts."""
    from test_pictures import ARTIFACTS, svg_frames
    baseline = str(deploy["tmp"] / "baseline_plus.txt")
    shutil.copy(deploy["live"]["v1"], baseline)
    with open(baseline) as f:
        lines = [line.rsplit(" ", 1) for line in f if line.strip()]
    total = sum(int(n) for _, n in lines)
    # a function the deploy removed, called where the others are: 1% of the baseline
    # (the others' shares barely move)
    # (the heaviest path's caller: the first line may be a rare path, such as one sampled
    # at start-up, that the live profile lacks, and then it is the gone path listed)
    heaviest = max(lines, key=lambda line: int(line[1]))[0]
    caller = ";".join(heaviest.split(";")[:2])
    with open(baseline, "a") as f:
        f.write("%s;retired (/srv/old.py:9) %d\n" % (caller, max(1, total // 100)))
    svg = str(deploy["tmp"] / "diff.svg")
    from_db(deploy, "v2", "-o", svg, "--baseline", baseline)
    text = diff_rows(from_db(deploy, "v2", "-f", "--baseline", baseline).stdout)
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "diff_flamegraph.png")
    page, frames, full = svg_frames(svg, shot, "^b ", "b")

    def frame(func):
        return next(f for f in frames if f["label"].startswith(func + " ("))

    def rgb(fill):
        return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))

    r, g, b = rgb(frame("b")["fill"])
    assert r == 255 and g < 150 and b < 150, frame("b")  # the largest growth: deep red
    for func in ("a", "c"):
        r, g, b = rgb(frame(func)["fill"])
        assert b == 255 and r < 235 and g < 235, frame(func)
    # a frame is a call path: its tooltip gives that path's shares, worked out here from
    # the two folded files; the text diff's per-function numbers when it is the
    # function's only path (a rare sample, such as one cut short, can add another)
    text_of = {name.split(" (")[0]: (before, after, delta) for name, before, after, delta in text}
    for func in ("a", "b", "c"):
        before, after = path_shares(baseline, func), path_shares(deploy["live"]["v2"], func)
        want = {path: ("%.2f" % before.get(path, 0.0), "%.2f" % share, "%+.2f" % (share - before.get(path, 0.0)))
                for path, share in after.items()}
        got = []
        for f in frames:
            if f["label"].startswith(func + " ("):
                m = re.search(r"before ([\d.]+)%, after ([\d.]+)%, difference ([+-][\d.]+) points", f["title"])
                assert m, f
                got.append(m.groups())
        widest = max(after, key=after.get)
        assert want[widest] in got and all(g in want.values() for g in got), (func, got, want)
        if len(before) == len(after) == 1:
            assert tuple(float(x) for x in want[widest]) == text_of[func], (func, want, text_of[func])
    with open(svg) as f:
        body = f.read()
    assert "Only in the baseline" in body and "retired (/srv/old.py)" in body, body[-2000:]
    assert os.path.getsize(shot) > 10000


def test_bad_input_says_why_and_writes_nothing(deploy, tmp_path):
    """An unknown table layout, an empty range, a baseline of the wrong kind: one line
    saying why, exit 1 (2 for a usage error), and no -o file."""
    out = str(tmp_path / "out.svg")
    other = str(tmp_path / "other.db")
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE ebpf_py_stack_profile (env TEXT, host TEXT, time_us INTEGER)")
    con.commit()
    con.close()
    # a speedscope file without pystack's samples (another tool's: no sampling period)
    speedscope = str(tmp_path / "p.speedscope.json")
    with open(speedscope, "w") as f:
        json.dump({"$schema": "https://www.speedscope.app/file-format-schema.json", "profiles": []}, f)
    # gzip, and protobuf, but no string table
    pprof = str(tmp_path / "p.pb.gz")
    with gzip.open(pprof, "wb") as f:
        f.write(b"\x0a\x02\x08\x01" * 8)
    svg = str(tmp_path / "p.svg")
    with open(svg, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg"></svg>\n')
    cut = str(tmp_path / "cut.pb.gz")
    from_db(deploy, "v1", "-o", cut)
    with open(cut, "rb") as f:
        whole = f.read()
    with open(cut, "wb") as f:
        f.write(whole[:len(whole) // 2])
    db = "sqlite:" + deploy["db"]
    cases = [
        (["--from", "sqlite:" + other, "-o", out], 1, "not the stored profile layout"),
        (["--from", "sqlite:" + str(tmp_path / "none.db"), "-o", out], 1, "unable to open"),
        (["--from", db, "--since", "2001-01-01", "--until", "2001-01-02", "-o", out], 1,
         "no py_stack samples stored (env fleet, since 2001-01-01T00:00:00.000000Z, until 2001-01-02"),
        (["--from", db, "-o", out, "--baseline", speedscope], 1, "no pystack samples"),
        (["--from", db, "-o", out, "--baseline", pprof], 1, "not a pprof profile pystack wrote"),
        (["--from", db, "-o", out, "--baseline", cut], 1, "a broken or cut gzip stream"),
        (["--from", db, "-o", out, "--baseline", svg], 1, "not folded stacks"),
        (["--from", db, "-o", out, "--baseline-since", "2001-01-01", "--baseline-until", "2001-01-02"], 1,
         "no py_stack samples stored"),
        (["--from", db, "-o", str(tmp_path / "out.pb.gz"), "--baseline", deploy["live"]["v1"]], 2,
         "a difference is drawn as .svg or written as text"),
        (["--from", "mysql://x", "-o", out], 2, "--from mysql://x: say sqlite:FILE"),
        (["--from", db, "--since", "yesterday", "-o", out], 2, "--since 'yesterday'"),
        (["--since", "-1h", "-o", out], 2, "need --from"),
    ]
    for args, code, message in cases:
        res = pystack("-e", "fleet", *args)
        assert res.returncode == code, (args, res.returncode, res.stderr)
        errors = [l for l in res.stderr.splitlines() if "error" in l or message in l]
        assert message in res.stderr and len(errors) == 1, (args, res.stderr)
        assert res.stdout == "", (args, res.stdout)
        assert not os.path.exists(out) and not os.path.exists(str(tmp_path / "out.pb.gz")), args


def test_from_clickhouse_is_the_same_as_from_sqlite_and_live(tmp_path):
    """One run into SQLite and ClickHouse at once: --from http://... (user tester, the
    password from a file) prints the lines --from sqlite: prints, which are the run's
    live -o FILE.txt; a diff of a profile against itself is all zeros; a wrong password
    and a database without the tables are one clear message each, exit 1."""
    from clickhouse_server import TESTER_PASSWORD, ClickHouse
    server = ClickHouse(tmp_path / "clickhouse")
    try:
        db, live = str(tmp_path / "p.db"), str(tmp_path / "live.txt")
        sample_timed_target([PYTHON, TARGET, "split"], {"live": [
            "-F", str(HZ), "-e", "ch", "--lines", "-o", live, "--sqlite", db, "--clickhouse-url", server.url,
            "--ch-flush-interval", "1", "--profile-window", "1"]}, 8)
        pwfile = tmp_path / "pw"
        pwfile.write_text(TESTER_PASSWORD + "\n")
        auth = ["--clickhouse-user", "tester", "--clickhouse-password-file", str(pwfile)]
        from_ch = pystack("--from", server.url, "-e", "ch", "-f", *auth)
        assert from_ch.returncode == 0, from_ch.stderr
        from_sqlite = pystack("--from", "sqlite:" + db, "-e", "ch", "-f")
        assert from_sqlite.returncode == 0, from_sqlite.stderr
        with open(live) as f:
            live_lines = sorted_lines(f.read())
        assert sorted_lines(from_ch.stdout) == sorted_lines(from_sqlite.stdout) == live_lines
        assert sum(int(l.rsplit(" ", 1)[1]) for l in live_lines) > 300
        # env and pid choose rows there too
        assert pystack("--from", server.url, "-e", "other", "-f", *auth).returncode == 1
        same = pystack("--from", server.url, "-e", "ch", "-f", "--baseline", live, *auth)
        assert same.returncode == 0, same.stderr
        rows = diff_rows(same.stdout)
        assert rows and all(d == 0 for _, _, _, d in rows), same.stdout
        wrong = pystack("--from", server.url, "-f", "--clickhouse-user", "tester", "--clickhouse-password", "x")
        assert wrong.returncode == 1 and "refused user 'tester'" in wrong.stderr, wrong.stderr
        assert wrong.stdout == ""
        server.query("CREATE DATABASE empty")
        layout = pystack("--from", server.url, "-f", "--clickhouse-database", "empty")
        assert layout.returncode == 1 and "not the stored profile layout" in layout.stderr, layout.stderr
        assert len(layout.stderr.strip().splitlines()) == 1 and layout.stdout == ""
    finally:
        server.close()
