"""TCP sockets in known numbers per state, on loopback, for hostnet's tests.

Run inside a fresh network namespace whose nft rules (set up by the test) drop the
final ACK to SYNRECV_PORT and every packet to BLACKHOLE_PORT. argv[1] is a JSON spec:
{"est4": N, "est6": N, "tw4": N, "tw6": N, "close_wait": N, "syn_recv": N,
 "syn_sent": N, "ports": {"l4": P, "l6": P, "syn_recv": P, "blackhole": P}}, and
optionally "tw_server_first": N (TIME_WAIT on the server side: N destinations).
Prints "ready" once every socket is in place, then holds them until stdin closes.
"""
import json
import socket
import sys

spec = json.loads(sys.argv[1])
ports = spec["ports"]
keep = []


def listener(family, addr, port):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, port))
    s.listen(128)
    keep.append(s)
    return s


def pair(lst, family, addr, port, local_port=0):
    c = socket.socket(family, socket.SOCK_STREAM)
    if local_port:
        c.bind((addr, local_port))
    c.connect((addr, port))
    s, _ = lst.accept()
    return c, s


l4 = listener(socket.AF_INET, "127.0.0.1", ports["l4"])
l6 = listener(socket.AF_INET6, "::1", ports["l6"])
lr = listener(socket.AF_INET, "127.0.0.1", ports["syn_recv"])
where = {4: (l4, socket.AF_INET, "127.0.0.1", ports["l4"]),
         6: (l6, socket.AF_INET6, "::1", ports["l6"])}

for fam, key in ((4, "est4"), (6, "est6")):
    for _ in range(spec[key]):
        keep.extend(pair(*where[fam]))

# TIME_WAIT on the client side: the client closes first, the server after the FIN
for fam, key in ((4, "tw4"), (6, "tw6")):
    for _ in range(spec[key]):
        c, s = pair(*where[fam])
        c.close()
        assert s.recv(1) == b""
        s.close()

# TIME_WAIT on the server side: the server closes first; each one leads to its own
# client port, so these are as many destinations. The client ports are chosen here,
# below the ephemeral range: a client port picked by the kernel may come round again,
# and a SYN from it takes over the server's TIME_WAIT socket, so the count would drop.
for i in range(spec.get("tw_server_first", 0)):
    c, s = pair(*where[4], local_port=10000 + i)
    s.close()
    assert c.recv(1) == b""
    c.close()

# CLOSE_WAIT on the server side: the client half-closes, the server never closes
for _ in range(spec["close_wait"]):
    c, s = pair(*where[4])
    c.shutdown(socket.SHUT_WR)
    assert s.recv(1) == b""
    keep.extend((c, s))

# SYN_RECV on the server side: nft drops the client's final ACK (the client is ESTABLISHED)
for _ in range(spec["syn_recv"]):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.connect(("127.0.0.1", ports["syn_recv"]))
    keep.append(c)

# SYN_SENT: nft drops the SYNs to the blackhole port
for _ in range(spec["syn_sent"]):
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setblocking(False)
    c.connect_ex(("127.0.0.1", ports["blackhole"]))
    keep.append(c)

print("ready", flush=True)
sys.stdin.read()
