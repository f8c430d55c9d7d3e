"""A newer ClickHouse than Debian's 18.16 for the sink tests: chDB's libchdb.so (the
ClickHouse engine as a library, npm package @chdb/lib-linux-x64-gnu, 26.x) behind a
small HTTP front that speaks the part of ClickHouse's HTTP interface the sink uses:
`query` in the URL, the body appended to it (INSERT ... FORMAT JSONEachRow), HTTP 200
with the result as TabSeparated, or 500 with the server's "Code: NN" text. Its own
data directory; one query at a time. User, password, database and settings in the
URL are not looked at (the tests use `default`). A temporary table (the sink's probes)
is dropped as soon as it was made: chDB has one session.

Where libchdb.so is: $PYEBPF_LIBCHDB, else the npm package under
$PYEBPF_CACHE (/var/cache/pyebpf)/chdb, which tests/integration/chdb_fetch.sh
installs. available() says why not when it is not there.

usage (a server of its own): python3 chdb_server.py DATADIR  -> prints its URL"""
import ctypes
import http.server
import os
import re
import socketserver
import sys
import threading
import urllib.parse

CACHE = os.environ.get("PYEBPF_CACHE", "/var/cache/pyebpf")
LIB = os.environ.get("PYEBPF_LIBCHDB") or os.path.join(
    CACHE, "chdb", "node_modules", "@chdb", "lib-linux-x64-gnu", "libchdb.so")


def available():
    """None when libchdb.so is there, else why not (for a skip)."""
    if os.path.exists(LIB):
        return None
    return "no ClickHouse newer than 18.16 here: %s is missing (tests/integration/chdb_fetch.sh)" % LIB


class Engine:
    """libchdb.so on a data directory: query(sql) -> (ok, text)."""

    def __init__(self, path):
        lib = ctypes.CDLL(LIB)
        lib.chdb_connect.restype = ctypes.c_void_p
        lib.chdb_connect.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.chdb_query.restype = ctypes.c_void_p
        lib.chdb_query.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        lib.chdb_result_error.restype = ctypes.c_char_p
        lib.chdb_result_buffer.restype = ctypes.c_void_p
        lib.chdb_result_length.restype = ctypes.c_size_t
        lib.chdb_destroy_query_result.restype = None
        for f in ("chdb_result_error", "chdb_result_buffer", "chdb_result_length", "chdb_destroy_query_result"):
            getattr(lib, f).argtypes = [ctypes.c_void_p]
        self.lib = lib
        args = (ctypes.c_char_p * 2)(b"clickhouse", ("--path=" + str(path)).encode())
        conn = lib.chdb_connect(2, args)
        if not conn:
            raise RuntimeError("chdb_connect failed on " + str(path))
        self.handle = conn
        self.conn = ctypes.cast(conn, ctypes.POINTER(ctypes.c_void_p)).contents.value
        self.lock = threading.Lock()

    def close(self):
        """chDB runs one engine a process: the next Engine connects only after this."""
        with self.lock:
            if self.handle:
                self.lib.chdb_close_conn.argtypes = [ctypes.c_void_p]
                self.lib.chdb_close_conn.restype = None
                self.lib.chdb_close_conn(self.handle)
                self.handle = self.conn = None

    def query(self, sql):
        with self.lock:
            r = self.lib.chdb_query(self.conn, sql.encode(), b"TabSeparated")
            try:
                err = self.lib.chdb_result_error(r)
                if err:
                    return False, err.decode(errors="replace")
                n = self.lib.chdb_result_length(r)
                return True, ctypes.string_at(self.lib.chdb_result_buffer(r), n).decode() if n else ""
            finally:
                self.lib.chdb_destroy_query_result(r)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/tab-separated-values; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_query(self, body):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/ping":
            return self.answer(200, "Ok.\n")
        sql = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        if body:
            sql += "\n" + body.decode()
        ok, text = self.server.engine.query(sql)
        temp = re.match(r"\s*CREATE\s+TEMPORARY\s+TABLE\s+(\w+)", sql, re.I)
        if ok and temp:
            self.server.engine.query("DROP TEMPORARY TABLE IF EXISTS " + temp.group(1))
        self.answer(200 if ok else 500, text)

    def do_GET(self):
        self.handle_query(b"")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.handle_query(self.rfile.read(n) if n else b"")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


class ChdbClickHouse:
    """The HTTP front on 127.0.0.1 (a free port), in this process: url, query(sql)."""

    def __init__(self, tmpdir):
        self.engine = Engine(os.path.join(str(tmpdir), "chdb"))
        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.engine = self.engine
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def query(self, sql):
        ok, text = self.engine.query(sql)
        if not ok:
            raise AssertionError(text)
        return text

    def rows(self, sql):
        return [line.split("\t") for line in self.query(sql).splitlines()]

    def count(self, table, where="1"):
        return int(self.query("SELECT count() FROM %s WHERE %s" % (table, where)))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.engine.close()


if __name__ == "__main__":
    why = available()
    if why:
        raise SystemExit(why)
    srv = ChdbClickHouse(sys.argv[1])
    print(srv.url, flush=True)
    threading.Event().wait()
