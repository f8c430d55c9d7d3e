"""One CPython process that gives every tool something to see, at a steady rate, for
the least-privilege tests (the same target traced as root and as a user with only
the documented capabilities; the two runs must agree).

Threads (their Python names are what the tools report):
  spinner-a, spinner-b  bursts of ~20 ms of computing in burn(), 20 ms apart: CPU
                        samples (pystack) and GIL waits (pygil)
  collector             cyclic garbage and gc.collect(0) every 20 ms (pygc)
  sleeper               time.sleep(0.05) in a loop (pyoffcpu)
  loop                  an asyncio loop whose callback blocks 150 ms every 0.5 s
                        (pyloop)
  acceptor, client      a TCP connect and accept to itself every 50 ms, the accepted
                        side read by the acceptor (tcphandshake, pyhandoff), and a
                        connect to a closed port every 50 ms (a RST: tcploss)

usage: all_kinds.py   (prints "ready" once every thread runs; runs until killed)
"""
import asyncio
import gc
import socket
import sys
import threading
import time


def burn():
    end = time.perf_counter() + 0.02
    while time.perf_counter() < end:
        sum(i * i for i in range(500))


def spinner():
    while True:
        burn()
        time.sleep(0.02)


def collector():
    while True:
        junk = []
        for _ in range(500):
            a = []
            a.append(a)
            junk.append(a)
        del junk
        gc.collect(0)
        time.sleep(0.02)


def sleeper():
    while True:
        time.sleep(0.05)


def stall():
    time.sleep(0.15)


def event_loop():
    loop = asyncio.new_event_loop()

    def tick():
        stall()
        loop.call_later(0.5, tick)

    loop.call_later(0.5, tick)
    loop.run_forever()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def acceptor(server):
    while True:
        conn, _ = server.accept()
        conn.recv(16)
        conn.close()


def client(port, refused_port):
    while True:
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"x")
        c.close()
        try:
            socket.create_connection(("127.0.0.1", refused_port)).close()
        except OSError:
            pass
        time.sleep(0.05)


def main():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]
    threads = [("spinner-a", spinner, ()), ("spinner-b", spinner, ()), ("collector", collector, ()),
               ("sleeper", sleeper, ()), ("loop", event_loop, ()), ("acceptor", acceptor, (server,)),
               ("client", client, (port, closed_port()))]
    for name, fn, args in threads:
        threading.Thread(target=fn, args=args, name=name, daemon=True).start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
