"""Connects to HOST PORT sequentially COUNT times and prints each connect's own
duration as measured by the client (the ground truth for handshake latency).

usage: tcp_timed_connect.py HOST PORT COUNT
"""
import json
import socket
import sys
import time

host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(count):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    t0 = time.monotonic()
    s.connect((host, port))
    t1 = time.monotonic()
    print(json.dumps({"sport": s.getsockname()[1], "connect_us": (t1 - t0) * 1e6}), flush=True)
    s.close()
