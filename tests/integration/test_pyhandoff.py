"""pyhandoff against real servers: Debian's gunicorn (gthread) and uwsgi, driven by wrk
and by our own clients. Ground truth: the servers' own logs (gunicorn access log,
uwsgi request log), the app's own timing, and what the fd-reuse target did."""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import time

import pytest

from conftest import TARGETS, assert_fields_documented, run

PY = "/usr/bin/python3"
TOOL = "pyhandoff"


def have_gunicorn():
    return subprocess.run([PY, "-c", "import gunicorn"], capture_output=True).returncode == 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "server exited early"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server on port %d did not come up" % port)


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def tids_of(pid):
    return {int(t) for t in os.listdir("/proc/%d/task" % pid)}


class Server:
    def __init__(self, cmd, port, env, cwd=TARGETS):
        self.port = port
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(port, self.proc)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def servers():
    started = []

    def start(cmd, port, **env_extra):
        env = dict(os.environ)
        env.update(env_extra)
        s = Server(cmd, port, env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def gunicorn(servers, tmp_path, threads, extra=(), **env):
    if not have_gunicorn():
        pytest.skip("Debian's python3-gunicorn is not installed (make deps)")
    port = free_port()
    log = tmp_path / "access.log"
    cmd = [PY, "-m", "gunicorn", "-b", "127.0.0.1:%d" % port, "--workers", "1",
           "--worker-class", "gthread", "--threads", str(threads), "--keep-alive", "30",
           "--access-logfile", str(log)] + list(extra) + ["handoff_app:app"]
    srv = servers(cmd, port, **env)
    deadline = time.time() + 20
    while not children_of(srv.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert children_of(srv.pid), "gunicorn started no worker"
    return srv, log


def wrk(port, seconds, conns=8, threads=2):
    if not shutil.which("wrk"):
        pytest.skip("wrk is not installed (make deps)")
    out = run(["wrk", "-t", str(threads), "-c", str(conns), "-d", "%ds" % seconds,
               "http://127.0.0.1:%d/" % port]).stdout
    return out


def log_lines(path):
    with open(path) as f:
        return [l for l in f if l.strip()]


def handoffs(events, pids=None):
    return [e for e in events if e["metric"] == "handoff" and e["queue_path"] in ("accept", "epoll_del")
            and (pids is None or e["pid"] in pids)]


def accept_waits(events, pid):
    return [e for e in events if e["metric"] == "handoff" and e["queue_path"] == "accept_queue"
            and e["pid"] == pid]


def proc_summary(events, pid):
    s = [e for e in events if e["metric"] == "handoff_process" and e["pid"] == pid]
    assert len(s) == 1, "no per-process summary for pid %d" % pid
    return s[0]


def test_gthread_keepalive_count_matches_access_log(run_tool, servers, tmp_path):
    srv, log = gunicorn(servers, tmp_path, threads=4)
    worker = children_of(srv.pid)[0]
    tool = run_tool(TOOL, "-p", str(srv.pid), "--children", "-e", "t1")
    out = wrk(srv.port, 4, conns=8)
    time.sleep(1.5)  # the last responses are logged, the last reads done
    worker_tids = tids_of(worker)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    events = tool.events()
    logged = len(log_lines(log))
    got = handoffs(events, {worker})
    assert logged > 800, "wrk got too few requests through: %s" % out
    accepts = [e for e in got if e["queue_path"] == "accept"]
    # the bar: within 1% of the access log
    assert abs(len(got) - logged) <= 0.01 * logged, (len(got), logged)
    # and exactly: one handoff per request; a connection's closing EOF (readable,
    # handed to the pool, read as b"": no request) is an eof record instead
    eofs = [e for e in events if e["metric"] == "handoff" and e["queue_path"] == "eof"]
    print("handoffs %d, access log %d, eof %d" % (len(got), logged, len(eofs)))
    # (plus at most one request per connection that wrk cut off when it stopped: read,
    # never answered, so never logged)
    assert logged <= len(got) <= logged + 8, (len(got), logged, len(eofs))
    for e in got:
        assert e["main_tid"] == worker, "the gthread main thread queues"
        assert e["worker_tid"] != worker and e["worker_tid"] in worker_tids
        assert e["tid"] == e["worker_tid"] and e["env"] == "t1"
        # the common field names the record's thread, the worker
        assert e["thread_name"] == e["worker_thread_name"] != e["worker_comm"]
        # outside a PID namespace the container ids are the host ids
        assert (e["container_pid"], e["container_tid"]) == (e["pid"], e["tid"]), e
        assert e["duration_ms"] == e["handoff_ms"] >= 0
        assert e["pickup_via"] == "recvfrom"
    paths = {e["queue_path"] for e in got}
    assert paths == {"accept", "epoll_del"}
    # every accepted connection had its accept-queue wait measured too (also those
    # whose first read was their end)
    assert len(accepts) <= len(accept_waits(events, worker)) <= len(accepts) + len(eofs)
    assert len(accept_waits(events, worker)) >= 8
    s = proc_summary(events, worker)
    assert s["model"] == "handoff" and s["handoffs"] == len(got) and s["same_thread_reads"] == 0
    lat = [e for e in events if e["metric"] == "handoff_latency" and e["pid"] == worker
           and e["kind"] == "handoff"]
    assert lat and lat[0]["count"] == len(got)
    med = statistics.median(e["duration_ms"] for e in got)
    assert abs(lat[0]["p50_ms"] - med) <= max(0.01, med * 0.05)
    assert "p50_ms=" in tool.stderr and "msecs : count" in tool.stderr  # -j: the human text on stderr
    summary = [e for e in events if e["metric"] == "pyhandoff_summary"][0]
    assert summary["lost"] == 0
    assert_fields_documented(TOOL, [e for e in events if e["metric"] == "handoff"])


def test_overload_median_matches_app_timing(run_tool, servers, tmp_path):
    applog = tmp_path / "app.log"
    srv, log = gunicorn(servers, tmp_path, threads=1, HANDOFF_SLEEP_MS="50",
                        HANDOFF_LOG=str(applog))
    worker = children_of(srv.pid)[0]
    tool = run_tool(TOOL, "-p", str(worker))
    slow = run_tool(TOOL, "-p", str(worker), "--min-ms", "200")
    ok = run([PY, os.path.join(TARGETS, "handoff_client.py"), str(srv.port), "8", "6"],
             timeout=300).stdout
    time.sleep(1)
    tool.stop()
    slow.stop()
    events = tool.events()
    assert int(ok) == 48
    waits = [float(l.split()[2]) for l in log_lines(applog)]
    assert len(waits) == 48
    got = handoffs(events, {worker})
    assert 48 <= len(got) <= 48 + 8, len(got)
    tool_med = statistics.median(e["duration_ms"] for e in got)
    app_med = statistics.median(waits)
    # 8 clients, one thread, 50 ms each: a request waits for up to 7 others
    assert tool_med >= 30, tool_med
    # the app's wait (client send -> handler) contains the handoff plus the main loop's part
    assert tool_med <= app_med + 5, (tool_med, app_med)
    assert tool_med >= 0.7 * app_med - 10, (tool_med, app_med)
    # --min-ms hides the shorter waits from the lines, not from the summary
    shown = [e for e in slow.events() if e["metric"] == "handoff"]
    assert all(e["duration_ms"] >= 200 for e in shown)
    want = [e for e in events if e["metric"] == "handoff" and e["duration_ms"] >= 200]
    assert abs(len(shown) - len(want)) <= 1 and len(shown) >= 20, (len(shown), len(want))
    lat = [e for e in slow.events() if e["metric"] == "handoff_latency" and e["kind"] == "handoff"]
    assert lat[0]["count"] == len(got)


def uwsgi_available():
    return shutil.which("uwsgi") and os.path.exists("/usr/lib/uwsgi/plugins/python3_plugin.so")


def test_uwsgi_accept_queue_waits_follow_server_log(run_tool, servers, tmp_path):
    if not uwsgi_available():
        pytest.skip("uwsgi-core and uwsgi-plugin-python3 are not installed (make deps)")
    port = free_port()
    log = tmp_path / "uwsgi.log"
    srv = servers(["uwsgi", "--plugin", "python3", "--http-socket", "127.0.0.1:%d" % port,
                   "--threads", "1", "--wsgi-file", "handoff_app.py", "--callable", "app",
                   "--logto", str(log)], port, HANDOFF_SLEEP_MS="150")
    time.sleep(0.5)
    base = len([l for l in log_lines(log) if " msecs " in l])  # wait_port's probe connection
    tool = run_tool(TOOL, "-p", str(srv.pid))
    n = 6
    ok = run([PY, os.path.join(TARGETS, "handoff_client.py"), str(port), str(n), "1", "close"],
             timeout=120).stdout
    time.sleep(1)
    tool.stop()
    assert int(ok) == n
    events = tool.events()
    waits = sorted(e["duration_ms"] for e in accept_waits(events, srv.pid))
    assert len(waits) == n, waits
    msecs = [int(l.split(" msecs ")[0].rsplit(" ", 1)[1]) for l in log_lines(log) if " msecs " in l]
    msecs = msecs[base:]
    assert len(msecs) == n
    # all n connect at once; the k-th accepted waited for the k-1 requests served before it
    expected = [sum(msecs[:k]) for k in range(n)]
    for got, exp in zip(waits, expected):
        assert abs(got - exp) <= 40 + 0.1 * exp, (waits, expected)
    assert waits[-1] >= 0.6 * 150 * (n - 1)
    s = proc_summary(events, srv.pid)
    assert s["model"] == "each-thread-accepts" and s["handoffs"] == 0
    assert s["same_thread_reads"] == n
    assert not handoffs(events)


def fdreuse_run(run_tool, prefix=(), python=PY):
    """Runs handoff_fdreuse.py (under prefix, e.g. unshare) traced; returns (events, used, pid)."""
    port = free_port()
    target = subprocess.Popen(list(prefix) + [python, os.path.join(TARGETS, "handoff_fdreuse.py"), str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        pid = target.pid
        if prefix:  # the python is the child of unshare
            pid = children_of(target.pid)[0]
        with open("/proc/%d/status" % pid) as f:
            nspid = [int(x) for l in f if l.startswith("NSpid:") for x in l.split()[1:]]
        tool = run_tool(TOOL, "-p", str(pid))
        target.stdin.write("\n")
        target.stdin.flush()
        used = json.loads(target.stdout.readline())
        time.sleep(0.5)
        tool.stop()
        target.stdin.write("\n")
        target.stdin.flush()
        target.wait(timeout=10)
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    return tool.events(), used, pid, nspid


def test_fd_reuse_and_same_thread_reads_are_no_handoffs(run_tool):
    events, used, pid, _ = fdreuse_run(run_tool)
    got = handoffs(events)
    assert len(got) == 1, got
    assert got[0]["fd"] == used["handoff"] and got[0]["queue_path"] == "accept"
    assert got[0]["main_tid"] == pid and got[0]["worker_tid"] != pid
    assert got[0]["main_thread_name"] == "MainThread"
    # outside a PID namespace the container ids are the host ids
    for e in [e for e in events if e["metric"] == "handoff"]:
        assert (e["container_pid"], e["container_tid"]) == (e["pid"], e["tid"]), e
    s = proc_summary(events, pid)
    assert s["fd_reused"] == 1  # the dup2()-replaced fd
    assert s["same_thread_reads"] == 1
    assert s["model"] == "handoff"
    assert len(accept_waits(events, pid)) == 4


PYENV = os.path.expanduser("~/.pyenv/versions")
INTERPRETERS = [("debian", PY)] + [
    (v, os.path.join(PYENV, d, "bin", "python" + v))
    for v in ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
    for d in (sorted(os.listdir(PYENV)) if os.path.isdir(PYENV) else [])
    if d.startswith(v + ".") and d[len(v) + 1:].isdigit()]


@pytest.mark.parametrize("name,python", INTERPRETERS, ids=[i[0] for i in INTERPRETERS])
def test_python_thread_names_across_versions(run_tool, name, python):
    if not os.path.exists(python):
        pytest.skip("%s is not installed" % python)
    events, used, pid, _ = fdreuse_run(run_tool, python=python)
    got = handoffs(events)
    assert len(got) == 1, got
    # threading's names, read from the target (the OS names are all "python3.X")
    assert got[0]["main_thread_name"] == "MainThread", got[0]
    assert got[0]["worker_thread_name"] == "reader", got[0]
    assert got[0]["worker_comm"] != "reader"


def test_container_ids_in_a_pid_namespace(run_tool):
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    events, used, pid, nspid = fdreuse_run(run_tool, ["unshare", "--pid", "--fork", "--mount-proc"])
    got = handoffs(events)
    assert len(got) == 1, got
    e = got[0]
    assert nspid == [pid, 1]
    assert e["pid"] == pid and e["container_pid"] == 1  # the namespace's first process
    assert e["container_tid"] != e["tid"] and 1 < e["container_tid"] < 100


def test_pid_that_is_not_a_server(run_tool):
    sleeper = subprocess.Popen(["sleep", "8"])
    try:
        tool = run_tool(TOOL, "-p", str(sleeper.pid))
        # no -d: the tool ends by itself when its only target exits
        tool.proc.wait(timeout=60)
        tool.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert tool.returncode == 0, tool.stderr
    assert "does not look like a server" in tool.stderr
    assert "%d exited" % sleeper.pid in tool.stderr
    assert "no accept or handoff seen" in tool.stderr
    assert not [e for e in tool.events() if e["metric"] == "handoff"]
    # a pid that does not exist is an error, not an empty trace
    r = run([os.path.join(os.environ.get("PYEBPF_BUILD", "build"), TOOL), "-p", "999999999"],
            check=False)
    assert r.returncode in (1, 2) and "999999999" in r.stderr
    r = run([os.path.join(os.environ.get("PYEBPF_BUILD", "build"), TOOL), "--children"], check=False)
    assert r.returncode == 2


def test_workers_restarting_mid_run_are_followed(run_tool, servers, tmp_path):
    srv, log = gunicorn(servers, tmp_path, threads=4,
                        extra=["--max-requests", "400", "--max-requests-jitter", "0"])
    first = children_of(srv.pid)[0]
    tool = run_tool(TOOL, "-p", str(srv.pid), "--children")
    wrk(srv.port, 6, conns=4)
    time.sleep(1.5)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    events = tool.events()
    logged = len(log_lines(log))
    got = handoffs(events)
    pids = {e["pid"] for e in got}
    assert first in pids
    # gunicorn replaced the worker at least once; the new ones were followed
    assert len(pids) >= 2 and logged >= 800, (pids, logged)
    assert srv.pid not in pids, "the arbiter itself hands nothing off"
    assert abs(len(got) - logged) <= 0.01 * logged, (len(got), logged)
    # one handoff per request, plus at most one per connection (its closing EOF)
    accepts = [e for e in got if e["queue_path"] == "accept"]
    assert logged <= len(got) <= logged + len(accepts), (len(got), logged, len(accepts))
    for p in pids:
        assert proc_summary(events, p)["model"] == "handoff"


def test_columns_results_go_to_stdout_in_ms_by_pid(run_tool, servers, tmp_path):
    """`pyhandoff > out.txt` keeps its results: the per-process lines and the histograms
    come on stdout, one block per pid in pid order, in ms like the events' WAIT_MS;
    only the notes and the loss counts stay on stderr."""
    import re
    srv, log = gunicorn(servers, tmp_path, threads=2, extra=("--workers", "3"))
    deadline = time.time() + 20
    while len(children_of(srv.pid)) < 3 and time.time() < deadline:
        time.sleep(0.1)
    tool = run_tool(TOOL, "-p", str(srv.pid), "--children", json_mode=False)
    wrk(srv.port, 3, conns=12, threads=3)
    time.sleep(1)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    out, err = tool.stdout, tool.stderr
    assert out.splitlines()[0].split()[:1] == ["TIME"] and "WAIT_MS" in out.splitlines()[0]
    blocks = [(int(p), k) for p, k in re.findall(r"^pid (\d+) \(.*\), (handoff|accept queue) waits:$", out, re.M)]
    pids = [p for p, _ in blocks]
    assert len(set(pids)) >= 2, out[-3000:]
    assert pids == sorted(pids) and len(set(blocks)) == len(blocks)
    assert "msecs : count" in out and "usecs" not in out + err
    # each block's counts are its latency line's count
    matched = 0
    for m in re.finditer(r"^pid (\d+) \([^)\n]*\), (handoff|accept queue) waits:\n(.*?)\nlatency: ([^\n]*)$", out,
                         re.M | re.S):
        counts = sum(int(l.split(":")[1].split()[0]) for l in m.group(3).splitlines()[1:])
        kv = dict(x.split("=", 1) for x in m.group(4).split())
        assert kv["pid"] == m.group(1) and int(kv["count"]) == counts
        matched += 1
    assert matched == len(blocks)
    assert re.search(r"^process: .* pid=%d .*model=\"handoff\"" % pids[0], out, re.M)
    assert "pyhandoff: summary: " in err and "latency:" not in err and "process:" not in err


def test_client_closes_are_not_requests(run_tool, servers, tmp_path):
    """A keep-alive connection the client closes becomes readable and gthread hands it
    to its pool like a request; the worker reads b"". 3 keep-alive curl runs (each
    closes its connection when it exits) and one with Connection: close (the server
    closes): 4 requests in the access log, 4 handoffs, and 3 eof records."""
    if not shutil.which("curl"):
        pytest.skip("curl is not installed (make deps)")
    srv, log = gunicorn(servers, tmp_path, threads=4)
    worker = children_of(srv.pid)[0]
    before = len(log_lines(log)) if log.exists() else 0
    tool = run_tool(TOOL, "-p", str(worker))
    url = "http://127.0.0.1:%d/" % srv.port
    for _ in range(3):
        run(["curl", "-sf", "-o", "/dev/null", url])
    run(["curl", "-sf", "-o", "/dev/null", "-H", "Connection: close", url])
    time.sleep(1.0)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    events = tool.events()
    assert len(log_lines(log)) - before == 4
    got = handoffs(events, {worker})
    eofs = [e for e in events if e["metric"] == "handoff" and e["queue_path"] == "eof"]
    assert len(got) == 4, [e["queue_path"] for e in events if e["metric"] == "handoff"]
    assert len(eofs) == 3 and all(e["main_tid"] == worker != e["worker_tid"] for e in eofs)
    s = proc_summary(events, worker)
    assert (s["handoffs"], s["client_closes"]) == (4, 3)
    lat = [e for e in events if e["metric"] == "handoff_latency" and e["kind"] == "handoff"]
    assert [e["count"] for e in lat] == [4]
    summary = tool.summary()
    assert summary["client_closes"] == 3
    assert summary["events"] == len(got) + len(accept_waits(events, worker)) == summary["printed"]


def test_master_without_children_suggests_them(run_tool, servers, tmp_path):
    """-p on gunicorn's master without --children: the master only forks and watches,
    its worker (which shares the listening socket) accepts and hands off. pyhandoff
    traces what it was asked to and says why that sees nothing, naming the worker and
    --children, at the start and again at the end."""
    srv, log = gunicorn(servers, tmp_path, threads=4)
    worker = children_of(srv.pid)[0]
    tool = run_tool(TOOL, "-p", str(srv.pid))
    for _ in range(3):
        run(["curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:%d/" % srv.port])
    time.sleep(0.5)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    assert len(log_lines(log)) >= 3
    assert handoffs(tool.events()) == []  # the master hands nothing off
    start = "pid %d (comm " % srv.pid
    assert start in tool.stderr and "has worker children" in tool.stderr, tool.stderr
    assert "(pid %d, ...)" % worker in tool.stderr and "add --children" in tool.stderr
    assert "pid %d's workers do that; run again with --children" % srv.pid in tool.stderr
    # with --children there is no such advice
    again = run_tool(TOOL, "-p", str(srv.pid), "--children")
    run(["curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:%d/" % srv.port])
    time.sleep(0.5)
    again.stop()
    assert "worker children" not in again.stderr and len(handoffs(again.events(), {worker})) == 1


PROCS_MAX = 4096  # the kernel's table of per-process counts (procs in bpf_text/pyhandoff.bpf.c)
EXITED_MAX = 1024  # the exited processes whose counts pyhandoff keeps (MAX_EXITED)


def test_exited_processes_leave_the_table_and_what_does_not_fit_is_counted(run_tool):
    """Host-wide, a process that accepted has an entry in the kernel's table of counts
    while it lives. 4,300 of them alive at once overflow it: the counts that did not
    fit are procs_full. After they and 2,000 short-lived ones exit, 300 new ones all
    fit (the exited left the table); the exited are handoff_process records up to
    1,024 and processes_untabled beyond. Every child accepted exactly one connection
    (the target's own count), so each is in a record, untabled or counted as dropped."""
    n_live, n_short, n_last = 4300, 2000, 300
    target = subprocess.Popen([PY, os.path.join(TARGETS, "handoff_forks.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def ask(command):
        target.stdin.write(command + "\n")
        target.stdin.flush()
        return json.loads(target.stdout.readline())

    try:
        assert target.stdout.readline().strip() == "ready"
        tool = run_tool(TOOL)
        live = ask("live %d" % n_live)
        ended = ask("end")
        short = ask("short %d" % n_short)
        last = ask("live %d" % n_last)
        time.sleep(0.5)  # a ring-buffer read (every 50 ms) takes the last exits' counts
        tool.stop()
        ask("exit")
        target.wait(timeout=30)
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    assert tool.returncode == 0, tool.stderr[-2000:]
    assert sorted(live) == sorted(ended) and len(set(live + short + last)) == n_live + n_short + n_last
    summary = tool.summary()
    records = tool.events("handoff_process")
    print("summary:", summary, "records:", len(records))
    assert summary["lost"] == 0, summary
    # the 4,300 alive together: at least 204 had no room (other processes of the host may
    # hold entries too, so more may miss it)
    assert summary["procs_full"] >= n_live - PROCS_MAX, summary
    # all 300 of the last wave found room, alive at the end: their counts from the table
    # (pids may come round again in 6,600 forks: an exited process's record has comm "?")
    alive = {r["pid"]: r for r in records if r["comm"] != "?"}
    for pid in last:
        r = alive[pid]
        assert r["accept_queue"] == 1 and r["model"] == "unknown", r
    # the exited: records up to the bound, the rest counted
    exited = [r for r in records if r["comm"] == "?"]
    assert len(exited) <= EXITED_MAX and len(records) <= PROCS_MAX + EXITED_MAX, (len(exited), len(records))
    mine = [r for r in exited if r["pid"] in set(live + short)]
    assert all(r["accept_queue"] == 1 for r in mine), [r for r in mine if r["accept_queue"] != 1][:5]
    # each child of the first two waves: its record, untabled, or its one count dropped
    assert len(mine) + summary["processes_untabled"] + summary["procs_full"] >= n_live + n_short, summary
    # at least the 2,000 short-lived ones had room, and exited: past 1,024 untabled
    assert summary["processes_untabled"] >= n_short - EXITED_MAX, summary
