"""Targets for pyoffcpu: threads that leave the CPU in known ways.

  sleep SECONDS   a thread named "sleeper" in time.sleep(SECONDS) loops (the line of
                  the call is marked SLEEP)
  recv SECONDS    a thread named "receiver" blocked in socket recv on a TCP peer that
                  answers after SECONDS (its line is marked RECV)
  spin            a thread named "spinner" that only computes (for run-queue tests)
  pingpong N      N pairs of threads handing a token through queues (switch storms)
  newthreads      a new thread every 150 ms (new-1, new-2, ...), each sleeping 30 ms
                  twice, then 0.5 s (so it still runs when the records of the short
                  sleeps are read), and ending

Prints "ready" (and with spin, the spinner's native thread id) once the threads run.
"""
import queue
import socket
import sys
import threading
import time


def sleeper(seconds):
    while True:
        time.sleep(seconds)  # SLEEP


def answer_late(server, seconds):
    while True:
        conn, _ = server.accept()
        while conn.recv(16):
            time.sleep(seconds)
            conn.sendall(b"pong")


def receiver(port):
    c = socket.create_connection(("127.0.0.1", port))
    while True:
        c.sendall(b"ping")
        c.recv(16)  # RECV


def spinner(out):
    out.append(threading.get_native_id())
    n = 0
    while True:
        n += 1


def short_sleeper():
    time.sleep(0.03)
    time.sleep(0.03)
    time.sleep(0.5)


def player(inbox, outbox):
    while True:
        outbox.put(inbox.get())


def main():
    mode = sys.argv[1]
    if mode == "sleep":
        threading.Thread(target=sleeper, args=(float(sys.argv[2]),), name="sleeper", daemon=True).start()
    elif mode == "recv":
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        threading.Thread(target=answer_late, args=(server, float(sys.argv[2])), name="answerer",
                         daemon=True).start()
        threading.Thread(target=receiver, args=(server.getsockname()[1],), name="receiver",
                         daemon=True).start()
    elif mode == "spin":
        tids = []
        threading.Thread(target=spinner, args=(tids,), name="spinner", daemon=True).start()
        while not tids:
            time.sleep(0.01)
        print(tids[0], flush=True)
    elif mode == "pingpong":
        for i in range(int(sys.argv[2])):
            a, b = queue.Queue(), queue.Queue()
            threading.Thread(target=player, args=(a, b), name="ping%d" % i, daemon=True).start()
            threading.Thread(target=player, args=(b, a), name="pong%d" % i, daemon=True).start()
            a.put(i)
    elif mode == "newthreads":
        print("ready", flush=True)
        for i in range(1, 1000000):
            threading.Thread(target=short_sleeper, name="new-%d" % i).start()
            time.sleep(0.15)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


main()
