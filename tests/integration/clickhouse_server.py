"""A real ClickHouse server (Debian's clickhouse-server) for the sink tests: its own
config, data and logs in a temp dir, listening on 127.0.0.1 on a free port; users
`default` (no password) and `tester` (password in TESTER_PASSWORD). It can be killed
and started again on the same port and data (the outage tests)."""
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

SERVER = shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"
TESTER_PASSWORD = "s3cret-pw"

CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>{d}/log/server.log</log><errorlog>{d}/log/err.log</errorlog></logger>
    <http_port>{http}</http_port>
    <tcp_port>{tcp}</tcp_port>
    <listen_host>{host}</listen_host>
    <path>{d}/data/</path>
    <tmp_path>{d}/tmp/</tmp_path>
    <user_files_path>{d}/user_files/</user_files_path>
    <format_schema_path>{d}/format_schemas/</format_schema_path>
    <users_config>{d}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709</mark_cache_size>
    <uncompressed_cache_size>8589934</uncompressed_cache_size>
    <max_concurrent_queries>20</max_concurrent_queries>
    {extra}
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users>
        <default><password></password><networks><ip>127.0.0.0/8</ip></networks><profile>default</profile><quota>default</quota></default>
        <tester><password>{pw}</password><networks><ip>127.0.0.0/8</ip></networks><profile>default</profile><quota>default</quota></tester>
    </users>
    <quotas><default></default></quotas>
</yandex>
"""


def free_port():
    """A port free now and below the ephemeral range: a server killed for a while (the
    outage tests) gets it back, while a port the kernel hands out as a connection's
    source port (2026-12-07: "Address already in use" at the restart) may be taken
    meanwhile, even by a client of this very server connecting to itself."""
    import random
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(1000):
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port between 10000 and %d" % low)


def cluster_config(name, nodes):
    """A remote_servers entry: cluster name of one shard per (host, tcp_port)."""
    shards = "".join("<shard><replica><host>%s</host><port>%d</port></replica></shard>" % n for n in nodes)
    return "<remote_servers><%s>%s</%s></remote_servers>" % (name, shards, name)


class ClickHouse:
    """host, http_port, tcp_port: where it listens (default 127.0.0.1, free ports);
    extra: more server config (e.g. cluster_config()), written as it is."""

    def __init__(self, tmpdir, host="127.0.0.1", http_port=None, tcp_port=None, extra="", start=True):
        self.dir = str(tmpdir)
        self.host = host
        self.http_port, self.tcp_port = http_port or free_port(), tcp_port or free_port()
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self.configure(extra)
        with open(os.path.join(self.dir, "users.xml"), "w") as f:
            f.write(USERS.format(pw=TESTER_PASSWORD))
        self.url = "http://%s:%d" % (host, self.http_port)
        self.proc = None
        if start:
            self.start()

    def configure(self, extra=""):
        with open(os.path.join(self.dir, "config.xml"), "w") as f:
            f.write(CONFIG.format(d=self.dir, http=self.http_port, tcp=self.tcp_port, host=self.host,
                                  extra=extra))

    def start(self, timeout=60):
        self.proc = subprocess.Popen([SERVER, "--config-file=" + os.path.join(self.dir, "config.xml")],
                                     cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=2) as r:
                    if r.read().strip() == b"Ok.":
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError("clickhouse-server exited: %s" % self.log())
            time.sleep(0.1)
        raise AssertionError("clickhouse-server did not answer in %d s: %s" % (timeout, self.log()))

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout=60):
        """A clean shutdown (SIGTERM): what it answered is written, its queues kept."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)

    def log(self):
        try:
            with open(os.path.join(self.dir, "log", "err.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def query(self, sql, user="default", password=""):
        """The server's answer to sql (TabSeparated text)."""
        url = "%s/?%s" % (self.url, urllib.parse.urlencode({"user": user, "password": password}))
        req = urllib.request.Request(url, data=sql.encode())
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def rows(self, sql):
        return [line.split("\t") for line in self.query(sql).splitlines()]

    def count(self, table, where="1"):
        return int(self.query("SELECT count() FROM %s WHERE %s" % (table, where)))

    def close(self):
        self.kill()


class AnswerLost:
    """A TCP proxy on 127.0.0.1 in front of server, for the clients under test: at the
    nth INSERT INTO table that the server answers with 200 (committed), it SIGKILLs the
    server after that answer came and before the client has it, and closes the
    client's connection: the insert landed, the client cannot know. Connections made
    while the server is down are closed at once (the server is away).
    fired: set once that happened."""

    def __init__(self, server, table, nth=1):
        self.server, self.nth, self.seen = server, nth, 0
        self.marker = ("query=INSERT%%20INTO%%20%s%%20" % table).encode()
        self.fired = threading.Event()
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.server.host, self.server.http_port), timeout=5)
            except OSError:
                _hang_up(client)
                continue
            upstream.settimeout(None)
            state = {"armed": False}
            threading.Thread(target=self._up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(client, upstream, state), daemon=True).start()

    def _up(self, client, upstream, state):
        """client → server; a request line naming the insert arms the connection."""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if b"POST /" in data:
                    with self.lock:
                        state["armed"] = False
                        if self.marker in data and not self.fired.is_set():
                            self.seen += 1
                            state["armed"] = self.seen >= self.nth
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _hang_up(upstream)

    def _down(self, client, upstream, state):
        """server → client; the armed insert's 200 answer kills the server instead."""
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if state["armed"] and data.startswith(b"HTTP/1.1 200"):
                    self.server.kill()
                    self.fired.set()
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            _hang_up(client)
            _hang_up(upstream)

    def close(self):
        self.listener.close()


def _hang_up(sock):
    """Closes sock for the peer too (a plain close() leaves it open while another
    thread is blocked in recv() on it)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
