"""Accepts connections on HOST PORT until killed, closing each right away."""
import socket
import sys

host, port = sys.argv[1], int(sys.argv[2])
srv = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((host, port))
srv.listen(64)
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    c.close()
