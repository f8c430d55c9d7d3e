"""Shared fixtures for the integration tests: real tools, real BPF, real targets.

Every test here runs a built tool (PYEBPF_BUILD, default ./build) as root and compares
what it prints with a ground truth that does not come from the tool.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PYEBPF_BUILD", os.path.join(ROOT, "build"))
TARGETS = os.path.join(ROOT, "tests", "targets")


def tool_path(name):
    return os.path.join(BUILD, name)


def pytest_collection_modifyitems(config, items):
    # Without root nothing here can load BPF: skip with the reason, never silently.
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="integration tests load BPF programs and need root")
        for item in items:
            item.add_marker(skip)


class Tool:
    """A tool running in the background; stop() ends it like Ctrl-C and parses its output.

    stdout goes to a file while the tool runs: thousands of lines would fill a pipe
    read only at stop(), block the tool and make it lose events.
    """

    def __init__(self, name, args, json_mode=True, env=None, prefix=()):
        import tempfile
        self.name = name
        # prefix: a command that execs the tool ("$0" "$@"), e.g. in another namespace
        cmd = list(prefix) + [tool_path(name)] + (["-j"] if json_mode else []) + list(args)
        self.cmd = cmd
        self.json_mode = json_mode
        self.spool = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=self.spool, stderr=subprocess.PIPE, env=env)
        self.stdout = self.stderr = None
        self.returncode = None

    def wait_ready(self, timeout=300):
        """Waits for the 'Hit Ctrl-C to end.' banner on stderr (compile + attach done)."""
        deadline = time.time() + timeout
        buf = b""
        os.set_blocking(self.proc.stderr.fileno(), False)
        while time.time() < deadline:
            chunk = self.proc.stderr.read()
            if chunk:
                buf += chunk
                if b"Hit Ctrl-C to end." in buf:
                    self._early_stderr = buf
                    os.set_blocking(self.proc.stderr.fileno(), True)
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        # kill first: a tool still running would never close stderr (and may be blocked
        # writing a stdout nobody reads)
        self.proc.kill()
        os.set_blocking(self.proc.stderr.fileno(), True)
        rest = self.proc.stderr.read() or b""
        raise AssertionError("%s did not become ready: %s" % (self.cmd, (buf + rest).decode(errors="replace")))

    def stop(self, sig=signal.SIGINT, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError("%s did not stop after %s" % (self.name, sig))
        self.returncode = self.proc.returncode
        self.spool.seek(0)
        self.stdout = self.spool.read().decode()
        self.spool.close()
        self.stderr = getattr(self, "_early_stderr", b"").decode() + err.decode()
        # a record whose keys its schema does not list is a bug of the tool
        assert "not in its schema" not in self.stderr, self.stderr[-2000:]
        return self

    def events(self, metric=None):
        """The JSON lines of stdout (all must parse), optionally one metric only."""
        assert self.json_mode
        lines = [json.loads(l) for l in self.stdout.splitlines() if l.strip()]
        return [e for e in lines if metric is None or e.get("metric") == metric]

    def summary(self):
        """The last line's summary record (metric <tool>_summary)."""
        found = self.events(self.name + "_summary")
        assert len(found) == 1, self.stdout[-2000:] + self.stderr[-2000:]
        return found[0]


@pytest.fixture
def run_tool():
    started = []

    def start(name, *args, json_mode=True, ready=True, env=None, prefix=()):
        t = Tool(name, args, json_mode=json_mode, env=env, prefix=prefix)
        started.append(t)
        if ready:
            t.wait_ready()
        return t

    yield start
    for t in started:
        if t.proc.poll() is None:
            t.proc.kill()
            t.proc.wait()


def sample_timed_target(cmd, tool_args, seconds):
    """A target that prints "ready", runs (and times itself) from a "go" line on, and
    prints its own timing as JSON at SIGTERM (py_split.py --wait, py_profile.py): a
    "pystack -p PID" per entry of tool_args ({name: more args}) started and ready first, all stopped
    after seconds (SIGINT, the target's SIGTERM with them). Returns (the target's
    timing, {name: stopped Tool}); nothing is left running whatever fails."""
    target = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tools = {}
    try:
        assert target.stdout.readline().strip() == b"ready"
        tools = {name: Tool("pystack", ["-p", str(target.pid)] + args, json_mode=False)
                 for name, args in tool_args.items()}
        for t in tools.values():
            t.wait_ready(timeout=600)
        target.stdin.write(b"go\n")
        target.stdin.flush()
        time.sleep(seconds)
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
        for t in tools.values():
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait()
    return json.loads(out.decode().strip().splitlines()[-1]), tools


def run(cmd, check=True, **kw):
    """Runs a command, returning CompletedProcess with text output."""
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


class NetnsPair:
    """Two network namespaces joined by a veth pair with offloads off (one skb = one MSS)."""

    def __init__(self, prefix="t"):
        tag = "%s%d%s" % (prefix, os.getpid() % 100000, uuid.uuid4().hex[:4])
        self.client, self.server = "pyc" + tag, "pys" + tag
        self.client_ip, self.server_ip = "10.213.%d.1" % (os.getpid() % 250), "10.213.%d.2" % (os.getpid() % 250)
        self.client_ip6, self.server_ip6 = "fd00:213::1", "fd00:213::2"
        for ns in (self.client, self.server):
            run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", "vc", "netns", self.client, "type", "veth", "peer", "name", "vs",
             "netns", self.server])
        for ns, dev, ip, ip6 in ((self.client, "vc", self.client_ip, self.client_ip6),
                                 (self.server, "vs", self.server_ip, self.server_ip6)):
            self.ns(ns, "ip", "addr", "add", ip + "/24", "dev", dev)
            self.ns(ns, "ip", "-6", "addr", "add", ip6 + "/64", "dev", dev, "nodad")
            self.ns(ns, "ip", "link", "set", dev, "up")
            self.ns(ns, "ip", "link", "set", "lo", "up")
            self.ns(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", check=False)

    def ns(self, ns, *cmd, check=True):
        return run(["ip", "netns", "exec", ns] + list(cmd), check=check)

    def popen(self, ns, cmd, **kw):
        return subprocess.Popen(["ip", "netns", "exec", ns] + list(cmd), **kw)

    def close(self):
        for ns in (self.client, self.server):
            run(["ip", "netns", "del", ns], check=False)


@pytest.fixture
def netns_pair():
    if not shutil.which("ip"):
        pytest.skip("iproute2 (ip) is not installed")
    pair = NetnsPair()
    try:
        yield pair
    finally:
        pair.close()


def bpf_progs_of(pid):
    """Ids of the BPF programs that process pid holds open (from its fds' fdinfo)."""
    ids = set()
    fdinfo = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def assert_nothing_left(prog_ids, timeout=10):
    """The programs a tool held are gone after it exited (freed once their fds close)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = run(["bpftool", "-j", "prog", "show"]).stdout
        alive = {p["id"] for p in json.loads(out or "[]")} & set(prog_ids)
        if not alive:
            break
        time.sleep(0.2)
    assert not alive, "BPF programs %s still loaded after the tool exited" % sorted(alive)
    with open("/sys/kernel/tracing/uprobe_events") as f:
        left = [l for l in f if "pyebpf_" in l]
    assert not left, "uprobe events left behind: %s" % left


def man_sections(tool):
    """The roff source of man/man8/TOOL.8 split by .SH heading."""
    path = os.path.join(ROOT, "man", "man8", tool + ".8")
    sections, name = {}, None
    with open(path) as f:
        for line in f:
            if line.startswith(".SH "):
                name = line[4:].strip().strip('"')
                sections[name] = []
            elif name:
                sections[name].append(line.rstrip("\n"))
    return sections


def man_tagged(tool, section):
    """The lines right after each .TP in a man page section (the tags)."""
    lines = man_sections(tool).get(section, [])
    return [lines[i + 1] for i, l in enumerate(lines[:-1]) if l.startswith(".TP")]


def man_capabilities(tool):
    """(needed, conditional): the capabilities REQUIREMENTS lists, in its order. A tag
    `.B CAP_X` is needed in every run; `.BR CAP_X " (when ...)"` only in the case named."""
    import re
    needed, conditional = [], []
    for tag in man_tagged(tool, "REQUIREMENTS"):
        m = re.match(r'\.B (CAP_[A-Z_]+)$', tag)
        if m:
            needed.append(m.group(1))
        m = re.match(r'\.BR (CAP_[A-Z_]+) " \(', tag)
        if m:
            conditional.append(m.group(1))
    return needed, conditional


def man_options(tool):
    """{(short or None, long)} as the OPTIONS section of the man page lists them."""
    import re
    opts = set()
    for tag in man_tagged(tool, "OPTIONS"):
        m = re.match(r'(?:\\fB-(\w)\\fR, )?\\fB--([\w-]+)\\fR', tag.replace("\\-", "-"))
        assert m, "%s.8: cannot read option tag %r" % (tool, tag)
        opts.add((m.group(1), m.group(2)))
    return opts


def help_options(tool):
    """{(short or None, long)} as TOOL --help lists them."""
    import re
    out = run([tool_path(tool), "--help"]).stdout
    opts = set()
    for line in out.splitlines():
        m = re.match(r'\s+(?:-(\w), )?--([\w-]+)', line)
        if m:
            opts.add((m.group(1), m.group(2)))
    return opts


def man_fields(tool):
    """The JSON keys the FIELDS section of the man page documents."""
    import re
    fields = set()
    for tag in man_tagged(tool, "FIELDS"):
        m = re.match(r'\\fB([\w]+)\\fR', tag)
        assert m, "%s.8: cannot read field tag %r" % (tool, tag)
        fields.add(m.group(1))
    return fields


def assert_fields_documented(tool, events, optional=("env",)):
    """The keys real events carry are exactly the FIELDS of the man page."""
    seen = set()
    for e in events:
        seen |= set(e)
    documented = man_fields(tool)
    assert seen <= documented, "%s emits undocumented keys %s" % (tool, sorted(seen - documented))
    missing = documented - seen - set(optional)
    assert not missing, "%s documents keys it never emitted: %s" % (tool, sorted(missing))
