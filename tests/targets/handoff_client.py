"""Concurrent keep-alive HTTP clients that stamp each request with its send time.

usage: handoff_client.py PORT CLIENTS REQUESTS_PER_CLIENT [close]
Each client thread keeps one connection (HTTP/1.1 keep-alive; with "close" a new
connection per request) and sends X-Sent: <wall-clock seconds> so the app can log
how long the request waited before its handler started. All clients start together.
Prints the number of 200 responses.
"""
import http.client
import sys
import threading
import time

port, clients, per = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
close = len(sys.argv) > 4 and sys.argv[4] == "close"
ok = []
barrier = threading.Barrier(clients)


def run():
    conn = None
    barrier.wait()
    for _ in range(per):
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("GET", "/", headers={"X-Sent": "%.6f" % time.time(),
                                          "Connection": "close" if close else "keep-alive"})
        resp = conn.getresponse()
        resp.read()
        if resp.status == 200:
            ok.append(1)
        if close:
            conn.close()
            conn = None
    if conn:
        conn.close()


threads = [threading.Thread(target=run) for _ in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(ok))
