"""The demo workload: a small Python HTTP service on 127.0.0.1 and a client calling it.

Runs for SECONDS (default 20), making a request every 50 ms; some requests build
garbage for the GC, all go through a new TCP connection.
"""
import http.client
import http.server
import sys
import threading
import time

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        junk = [[i, str(i)] for i in range(20000)]  # work, and garbage for the collector
        body = ("%d\n" % len(junk)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, name="http-server", daemon=True).start()
port = server.server_address[1]
print("demo workload: pid %d, http://127.0.0.1:%d/" % (__import__("os").getpid(), port), flush=True)
deadline = time.time() + seconds
while time.time() < deadline:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/")
    c.getresponse().read()
    c.close()
    time.sleep(0.05)
server.shutdown()
