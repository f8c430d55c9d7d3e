"""A retransmit storm for bench/tcploss.sh: FLOWS connections sending flat out.

  server HOST PORT FLOWS      accept FLOWS connections, read and discard until EOF
  client HOST PORT FLOWS SEC  FLOWS connections, each sending as fast as it can for SEC s

Loss comes from an nft rule in the server's namespace (set up by the caller).
"""
import socket
import sys
import threading
import time


def drain(c):
    buf = bytearray(1 << 20)
    try:
        while c.recv_into(buf):
            pass
    except OSError:
        pass
    c.close()


def pump(host, port, until):
    s = socket.create_connection((host, port))
    data = b"x" * (1 << 20)
    try:
        while time.monotonic() < until:
            s.sendall(data)
    except OSError:
        pass
    s.close()


def main():
    mode, host, port, flows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode == "server":
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(flows)
        print("listening", flush=True)
        threads = []
        for _ in range(flows):
            c, _ = srv.accept()
            t = threading.Thread(target=drain, args=(c,), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
    else:
        until = time.monotonic() + float(sys.argv[5])
        threads = [threading.Thread(target=pump, args=(host, port, until)) for _ in range(flows)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
