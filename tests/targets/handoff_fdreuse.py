"""fd reuse and same-thread reads, for pyhandoff's no-false-match checks.

Listens on 127.0.0.1:PORT (argv[1]) and takes four connections from its own client
thread, one scenario each, then prints one JSON line with the fd numbers used:
  replaced: accepted in the main thread, the fd number then replaced by dup2() with a
            pipe (no close() call), and the pipe read by another thread -> no handoff
  closed:   accepted, closed, the number reused by a pipe read by another thread -> none
  handoff:  accepted in the main thread, read by another thread -> exactly one handoff
  same:     accepted and read by the main thread -> no handoff (same thread)
"""
import json
import os
import queue
import socket
import sys
import threading


# one long-lived thread named "reader" does the other-thread reads (alive while traced,
# so a tracer can still read its Python name)
_jobs = queue.Queue()


def _reader():
    while True:
        fn, done = _jobs.get()
        if fn is None:
            return
        fn()
        done.set()


def in_thread(fn):
    done = threading.Event()
    _jobs.put((fn, done))
    done.wait()


def main():
    port = int(sys.argv[1])
    reader = threading.Thread(target=_reader, name="reader", daemon=True)
    reader.start()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()  # the tracer is attached

    clients = []

    def client():
        for _ in range(4):
            c = socket.create_connection(("127.0.0.1", port))
            c.sendall(b"x" * 10)
            clients.append(c)

    ct = threading.Thread(target=client)
    ct.start()
    # all four are connected (the backlog holds them) before the fd numbers below are
    # juggled: a socket the client made meanwhile could take the number being replaced,
    # and its failed connect would close the pipe behind it
    ct.join()
    used = {}

    conn, _ = ls.accept()
    fd = conn.fileno()
    r, w = os.pipe()
    os.write(w, b"p")
    os.dup2(r, fd)  # the socket behind fd is gone; fd is now a pipe
    in_thread(lambda: os.read(fd, 1))
    used["replaced"] = fd
    os.close(r)
    os.close(w)

    conn2, _ = ls.accept()
    fd = conn2.fileno()
    conn2.close()
    r, w = os.pipe()
    if r != fd:  # make the pipe take the closed number
        os.dup2(r, fd)
        os.close(r)
    os.write(w, b"p")
    in_thread(lambda: os.read(fd, 1))
    used["closed"] = fd
    os.close(fd)
    os.close(w)

    conn3, _ = ls.accept()
    in_thread(lambda: conn3.recv(10))
    used["handoff"] = conn3.fileno()

    conn4, _ = ls.accept()
    conn4.recv(10)
    used["same"] = conn4.fileno()

    print(json.dumps(used))
    sys.stdout.flush()
    sys.stdin.readline()


main()
