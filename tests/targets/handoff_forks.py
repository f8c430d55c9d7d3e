"""pyhandoff target: many processes that each accept one connection, for its table of
per-process counts (one entry per process that accepted, in the kernel).

usage: handoff_forks.py   (prints "ready", then takes commands on stdin, one a line,
and answers each with one JSON line:
  live N    N child processes that each accept one connection and stay alive: their pids
  short N   N child processes that each accept one connection and exit: their pids
  end       kills the live children and reaps them: their pids
  exit      the same, then exits)

Each child accepts from the listener the parent connects to on 127.0.0.1, so every
child's accept() finds an ESTABLISHED connection: one accept_queue count each.
"""
import json
import os
import signal
import socket
import sys

WINDOW = 256  # connections waiting for their child's accept at most (the listen backlog)

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(WINDOW * 2)
port = listener.getsockname()[1]
live = []
hold_r, hold_w = os.pipe()  # never written: a live child's read waits until it is killed


def spawn(n, stay):
    """n children that accept one connection each; returns their pids once all have."""
    pids, clients = [], []
    ready_r, ready_w = os.pipe()
    waiting = 0
    for _ in range(n):
        client = socket.create_connection(("127.0.0.1", port))
        pid = os.fork()
        if pid == 0:
            conn, _ = listener.accept()
            os.write(ready_w, b"x")
            if stay:
                os.read(hold_r, 1)
            os._exit(0)
        pids.append(pid)
        clients.append(client)
        waiting += 1
        if waiting == WINDOW:
            waiting -= len(os.read(ready_r, waiting))
            for c in clients:
                c.close()
            clients = []
    while waiting:
        waiting -= len(os.read(ready_r, waiting))
    for c in clients:
        c.close()
    os.close(ready_r)
    os.close(ready_w)
    if not stay:
        for pid in pids:
            os.waitpid(pid, 0)
    return pids


def end():
    gone = list(live)
    for pid in gone:
        os.kill(pid, signal.SIGKILL)
    for pid in gone:
        os.waitpid(pid, 0)
    del live[:]
    return gone


print("ready", flush=True)
for line in sys.stdin:
    words = line.split()
    if words[0] == "live":
        pids = spawn(int(words[1]), True)
        live.extend(pids)
    elif words[0] == "short":
        pids = spawn(int(words[1]), False)
    else:
        pids = end()
    print(json.dumps(pids), flush=True)
    if words[0] == "exit":
        break
