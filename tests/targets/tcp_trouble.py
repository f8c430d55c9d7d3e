"""TCP endpoints that get into known kinds of trouble, for tcploss's tests.

Each mode prints JSON lines about what it did (its own ground truth), flushed:
  sink HOST PORT                 accept one connection, read to EOF, report bytes
  stall HOST PORT SECONDS BYTES  tiny receive buffer; accept, do not read for SECONDS,
                                 then read BYTES and answer "ok" (the peer sees a zero
                                 window, and stays ESTABLISHED until "ok")
  send HOST PORT BYTES [PAUSE]   connect, send BYTES (PAUSE s between 1 KiB chunks), close
  send_wait HOST PORT BYTES      small send buffer; connect, send BYTES, wait for "ok"
  refused HOST PORT [wait]       connect to a port nobody listens on (wait: then stay
                                 until stdin closes, for a tracer to read its names)
  linger_server HOST PORT        accept, read one line, close with SO_LINGER {1,0} (RST)
  linger_client HOST PORT        connect, send one line, wait for "go" on stdin, close
                                 with SO_LINGER {1,0} (RST)
  sinks HOST PORT FLOWS          accept FLOWS connections, read each to EOF, report bytes
  storm HOST PORT FLOWS SECONDS  FLOWS connections, each sending flat out for SECONDS,
                                 closed once the sinks have read everything
"""
import json
import os
import socket
import struct
import sys
import threading
import time


def say(**kw):
    kw.setdefault("pid", os.getpid())
    print(json.dumps(kw), flush=True)


def family_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def listener(host, port, rcvbuf=None):
    srv = socket.socket(family_of(host))
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf:
        # before listen(): accepted sockets inherit it, and the window scale follows it
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    srv.bind((host, port))
    srv.listen(16)
    say(event="listening")
    return srv


def read_all(c):
    n = 0
    while True:
        b = c.recv(65536)
        if not b:
            return n
        n += len(b)


def linger_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def main():
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "sink":
        c, peer = listener(host, port).accept()
        try:
            n = read_all(c)
            say(event="received", bytes=n, peer_port=peer[1])
        except ConnectionResetError:
            say(event="reset", peer_port=peer[1])
        c.close()
    elif mode == "stall":
        c, peer = listener(host, port, rcvbuf=4096).accept()
        say(event="accepted", peer_port=peer[1])
        time.sleep(float(sys.argv[4]))
        say(event="reading", time=time.time())
        want, n = int(sys.argv[5]), 0
        while n < want:
            b = c.recv(65536)
            if not b:
                break
            n += len(b)
        c.sendall(b"ok")
        say(event="received", bytes=n, peer_port=peer[1])
        read_all(c)
        c.close()
    elif mode == "send":
        total, pause = int(sys.argv[4]), float(sys.argv[5]) if len(sys.argv) > 5 else 0
        s = socket.create_connection((host, port))
        say(event="connected", sport=s.getsockname()[1])
        chunk = b"x" * (1024 if pause else 65536)
        sent = 0
        while sent < total:
            s.sendall(chunk[:total - sent])
            sent += min(len(chunk), total - sent)
            if pause:
                time.sleep(pause)
        s.shutdown(socket.SHUT_WR)
        read_all(s)  # the sink closes after reading everything: all data arrived
        s.close()
        say(event="sent", bytes=sent)
    elif mode == "send_wait":
        s = socket.socket(family_of(host))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        s.connect((host, port))
        say(event="connected", sport=s.getsockname()[1])
        s.sendall(b"x" * int(sys.argv[4]))
        ok = s.recv(2)
        s.close()
        say(event="sent", answer=ok.decode())
    elif mode == "refused":
        s = socket.socket(family_of(host))
        try:
            s.connect((host, port))
            say(event="connected")
        except ConnectionRefusedError:
            say(event="refused")
        if sys.argv[4:] == ["wait"]:
            sys.stdin.read()
    elif mode == "linger_server":
        c, peer = listener(host, port).accept()
        c.recv(100)
        say(event="resetting", peer_port=peer[1])
        linger_close(c)
    elif mode == "linger_client":
        s = socket.create_connection((host, port))
        s.sendall(b"hello\n")
        say(event="connected", sport=s.getsockname()[1])
        if sys.stdin.readline().strip() == "go":
            linger_close(s)
            say(event="resetting")
        else:
            # the server resets: wait for it to arrive
            try:
                while s.recv(100):
                    pass
                say(event="closed")
            except ConnectionResetError:
                say(event="reset")
    elif mode == "sinks":
        srv, flows, got = listener(host, port), int(sys.argv[4]), []
        conns = [srv.accept()[0] for _ in range(flows)]
        threads = [threading.Thread(target=lambda c=c: got.append(read_all(c))) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        say(event="received", bytes=sum(got), flows=len(got))
    elif mode == "storm":
        flows, until = int(sys.argv[4]), time.monotonic() + float(sys.argv[5])
        socks = [socket.create_connection((host, port)) for _ in range(flows)]
        say(event="connected", sports=[s.getsockname()[1] for s in socks])
        sent = [0] * flows

        def pump(i):
            data = b"x" * 65536
            while time.monotonic() < until:
                socks[i].sendall(data)
                sent[i] += len(data)
            socks[i].shutdown(socket.SHUT_WR)
            read_all(socks[i])  # the sink closes after reading everything
            socks[i].close()
        threads = [threading.Thread(target=pump, args=(i,)) for i in range(flows)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        say(event="sent", bytes=sum(sent))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
