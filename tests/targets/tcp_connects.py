"""A process that makes a known number of TCP connections to itself.

usage: tcp_connects.py N FAMILY(4|6) [CLOSED_PORT]
Waits for a line on stdin, then connects N times to its own listener and accepts
each; with CLOSED_PORT, also tries one connect to that (closed) port. Prints one JSON
line: its pid, the listener port, the client ports and whether the refused connect
was refused, then exits when stdin closes.
"""
import json
import os
import socket
import sys

n, fam = int(sys.argv[1]), socket.AF_INET6 if sys.argv[2] == "6" else socket.AF_INET
closed_port = int(sys.argv[3]) if len(sys.argv) > 3 else None
host = "::1" if fam == socket.AF_INET6 else "127.0.0.1"
srv = socket.socket(fam)
srv.bind((host, 0))
srv.listen(64)
port = srv.getsockname()[1]
print(json.dumps({"ready": True, "pid": os.getpid(), "port": port}), flush=True)
sys.stdin.readline()
clients, accepted = [], []
for _ in range(n):
    c = socket.create_connection((host, port))
    a, _ = srv.accept()
    clients.append(c.getsockname()[1])
    accepted.append((c, a))
refused = None
if closed_port:
    try:
        socket.create_connection((host, closed_port), timeout=5).close()
        refused = False
    except ConnectionRefusedError:
        refused = True
print(json.dumps({"pid": os.getpid(), "port": port, "client_ports": clients,
                  "refused": refused}), flush=True)
sys.stdin.read()  # alive until stdin closes: a tracer can still read its thread names
