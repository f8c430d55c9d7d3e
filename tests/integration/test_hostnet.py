"""hostnet against ground truth: ss in the same network namespace at the same moment,
sockets made in known numbers per state, the kernel's interface counters, /proc fds.
"""
import json
import os
import re
import subprocess
import sys
import time
import uuid

import pytest

from conftest import TARGETS, assert_fields_documented, run, tool_path

PY = "/usr/bin/python3"

# ss state names -> hostnet keys
SS_STATES = {"ESTAB": "established", "SYN-SENT": "syn_sent", "SYN-RECV": "syn_recv",
             "FIN-WAIT-1": "fin_wait1", "FIN-WAIT-2": "fin_wait2", "TIME-WAIT": "time_wait",
             "CLOSE-WAIT": "close_wait", "LAST-ACK": "last_ack", "LISTEN": "listen",
             "CLOSING": "closing"}


class Netns:
    """One fresh network namespace (name unique to this test run), lo up, always deleted."""

    def __init__(self):
        self.name = "hn%d%s" % (os.getpid(), uuid.uuid4().hex[:4])
        run(["ip", "netns", "add", self.name])
        self.run("ip", "link", "set", "lo", "up")

    def run(self, *cmd, check=True, **kw):
        return run(["ip", "netns", "exec", self.name] + list(cmd), check=check, **kw)

    def popen(self, *cmd, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name] + list(cmd), **kw)

    def hostnet(self, *args, check_rc=0, count=1):
        """count snapshots (-c) 0.2 s apart as JSON; returns (the last snapshot, all JSON
        lines, stderr). The first has no deltas: count=2 for those."""
        p = self.run(tool_path("hostnet"), "-j", "-c", str(count), "-i", "0.2", *args, check=False,
                     timeout=60)
        assert p.returncode == check_rc, p.stderr
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        snaps = [l for l in lines if l["metric"] == "host_net_health"]
        assert len(snaps) == count, p.stdout
        return snaps[-1], lines, p.stderr

    def close(self):
        run(["ip", "netns", "del", self.name], check=False)


@pytest.fixture
def netns():
    ns = Netns()
    try:
        yield ns
    finally:
        ns.close()


def ss_counts(ns, port_range=None):
    """hostnet's socket keys computed from `ss -tan` in the namespace."""
    out = ns.run("ss", "-Htan").stdout
    counts = {k: 0 for k in SS_STATES.values()}
    rows = []
    for line in out.splitlines():
        f = line.split()
        state, local, peer = f[0], f[3], f[4]
        counts[SS_STATES[state]] += 1
        rows.append((state, int(local.rsplit(":", 1)[1]), peer))
    listening = {p for s, p, _ in rows if s == "LISTEN"}
    inbound = sum(1 for s, p, _ in rows if s == "ESTAB" and p in listening)
    counts["established_inbound"] = inbound
    counts["established_outbound"] = counts.pop("established") - inbound
    counts["tcp_sockets"] = len(rows)
    tw = {}
    for s, _, peer in rows:
        if s == "TIME-WAIT":
            tw[peer] = tw.get(peer, 0) + 1
    counts["max_time_wait_one_dst"] = max(tw.values()) if tw else 0
    if port_range:
        lo, hi = port_range
        counts["ephemeral_sockets"] = sum(1 for s, p, _ in rows if s != "LISTEN" and lo <= p <= hi)
    return counts


def port_range(ns):
    lo, hi = ns.run("cat", "/proc/sys/net/ipv4/ip_local_port_range").stdout.split()
    return int(lo), int(hi)


def start_target(ns, script, *args):
    p = ns.popen(PY, os.path.join(TARGETS, script), *args, stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        p.kill()
        raise AssertionError("%s did not start: %s %s" % (script, line, p.stderr.read()))
    return p


def stop_target(p):
    if p.poll() is None:
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


SPEC = {"est4": 7, "est6": 4, "tw4": 13, "tw6": 5, "close_wait": 6, "syn_recv": 3, "syn_sent": 2,
        "ports": {"l4": 5001, "l6": 5002, "syn_recv": 5003, "blackhole": 5004}}
NFT_RULES = """
table inet hostnet_test {
  chain input {
    type filter hook input priority 0;
    tcp dport %(syn_recv)d tcp flags & (syn | ack) == ack counter drop
    tcp dport %(blackhole)d counter drop
  }
}
""" % SPEC["ports"]


def test_states_match_ss_and_known_numbers(netns):
    netns.run("nft", "-f", "-", input=NFT_RULES)
    target = start_target(netns, "hostnet_sockets.py", json.dumps(SPEC))
    try:
        rng = port_range(netns)
        # the sockets are still: ss before and after brackets hostnet's snapshot
        before = ss_counts(netns, rng)
        snap, lines, _ = netns.hostnet("--procs", "nosuchproc")
        after = ss_counts(netns, rng)
    finally:
        stop_target(target)
    assert before == after, "sockets moved during the snapshot: %s vs %s" % (before, after)
    for key, value in before.items():
        assert snap[key] == value, "%s: hostnet %s, ss %s" % (key, snap[key], value)

    # and ss itself agrees with what the target made
    s = SPEC
    expected = {
        "listen": 3,
        "established_inbound": s["est4"] + s["est6"],
        # client ends of the accepted connections, and of the half-open ones to syn_recv
        "established_outbound": s["est4"] + s["est6"] + s["syn_recv"],
        "time_wait": s["tw4"] + s["tw6"],
        "close_wait": s["close_wait"],
        "fin_wait2": s["close_wait"],
        "syn_recv": s["syn_recv"],
        "syn_sent": s["syn_sent"],
        "max_time_wait_one_dst": s["tw4"],
    }
    for key, value in expected.items():
        assert snap[key] == value, "%s: hostnet %s, made %s" % (key, snap[key], value)
    assert snap["max_time_wait_dst"] == "127.0.0.1:%d" % s["ports"]["l4"]
    ephemeral = (2 * (s["est4"] + s["est6"]) + s["syn_recv"] + s["tw4"] + s["tw6"]
                 + s["close_wait"] + s["syn_sent"]) - (s["est4"] + s["est6"])
    assert snap["ephemeral_sockets"] == ephemeral
    assert snap["port_range_size"] == rng[1] - rng[0] + 1
    assert snap["port_util_pct"] == pytest.approx(100.0 * ephemeral / (rng[1] - rng[0] + 1), abs=0.001)
    assert snap["warnings"] == []
    assert_fields_documented("hostnet", lines)


def test_time_wait_per_destination(netns):
    # thousands of destinations (server-side TIME_WAIT, one per client port) and one
    # destination with a known pile: the biggest pile is found among them all
    spec = dict(SPEC, est4=0, est6=0, tw4=37, tw6=0, close_wait=0, syn_recv=0, syn_sent=0,
                tw_server_first=3001)
    target = start_target(netns, "hostnet_sockets.py", json.dumps(spec))
    try:
        before = ss_counts(netns)
        snap, _, _ = netns.hostnet("--warn-time-wait-dst", "30")
        after = ss_counts(netns)
    finally:
        stop_target(target)
    assert before == after
    assert snap["time_wait"] == before["time_wait"] == 37 + 3001
    assert snap["max_time_wait_one_dst"] == before["max_time_wait_one_dst"] == 37
    assert snap["max_time_wait_dst"] == "127.0.0.1:%d" % SPEC["ports"]["l4"]
    assert [w for w in snap["warnings"] if w.startswith("time_wait_concentration: 37 ")], snap["warnings"]


def test_shrunken_port_range_warns(netns):
    netns.run("sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40009")
    spec = dict(SPEC, est4=9, est6=0, tw4=0, tw6=0, close_wait=0, syn_recv=0, syn_sent=0)
    target = start_target(netns, "hostnet_sockets.py", json.dumps(spec))
    try:
        truth = ss_counts(netns, (40000, 40009))
        snap, _, _ = netns.hostnet()
        quiet, _, _ = netns.hostnet("--warn-port-pct", "95")
    finally:
        stop_target(target)
    assert truth["ephemeral_sockets"] == 9
    assert snap["ephemeral_sockets"] == 9 and snap["port_range_size"] == 10
    assert snap["port_util_pct"] == pytest.approx(90.0)
    assert [w for w in snap["warnings"] if w.startswith("port_exhaustion")], snap["warnings"]
    assert not [w for w in quiet["warnings"] if w.startswith("port_exhaustion")], quiet["warnings"]


def test_fd_usage_of_a_process(netns):
    comm = "hnfd%d" % (os.getpid() % 10000000)
    n, limit = 211, 256
    p = subprocess.Popen([PY, os.path.join(TARGETS, "fd_holder.py"), comm, str(n), str(limit)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        truth = len(os.listdir("/proc/%d/fd" % p.pid))
        snap, _, _ = netns.hostnet("--procs", comm)
        quiet, _, _ = netns.hostnet("--procs", comm, "--warn-fd-pct", "90")
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    # the seed's shape: a list of {proc, pids, fd_count, fd_limit, fd_util_pct, ...}
    listed = json.loads(snap["fd_usage_json"])
    assert [u["proc"] for u in listed] == [comm]
    usage = listed[0]
    assert usage["pids"] == 1 and usage["max_pid"] == p.pid
    assert usage["fd_count"] == truth, (usage, truth)
    assert n <= usage["fd_count"] <= n + 10  # python's own stdin/out/err and a few more
    assert usage["fd_limit"] == limit
    assert usage["fd_util_pct"] == pytest.approx(100.0 * truth / limit, abs=0.001)
    assert usage["unreadable"] == 0
    assert [w for w in snap["warnings"] if w.startswith("fd_exhaustion: %s" % comm)], snap["warnings"]
    assert not [w for w in quiet["warnings"] if w.startswith("fd_exhaustion")], quiet["warnings"]


def link_stats(ns, dev):
    s = json.loads(ns.run("ip", "-s", "-j", "link", "show", dev).stdout)[0]["stats64"]
    return s["rx"], s["tx"]


def test_interface_deltas_match_kernel_counters(netns):
    k = 101
    # the first snapshot (the baseline) is taken right after the banner, the second 6 s later
    tool = netns.popen(tool_path("hostnet"), "-j", "-c", "2", "-i", "6", "--interface", "lo",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = tool.stderr.readline()
        t0 = time.time()
        assert "Hit Ctrl-C to end." in banner, banner
        rx0, tx0 = link_stats(netns, "lo")
        send = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                "r=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); r.bind(('127.0.0.1',0))\n"
                "[s.sendto(b'x'*100, r.getsockname()) for _ in range(%d)]\n" % k)
        netns.run(PY, "-c", send)
        rx1, tx1 = link_stats(netns, "lo")
        sent_in = time.time() - t0
        out, err = tool.communicate(timeout=60)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    if sent_in > 4.5:
        pytest.skip("the machine was too slow to send within the interval (%.1f s)" % sent_in)
    snap = [json.loads(l) for l in out.splitlines() if '"host_net_health"' in l][-1]
    assert rx1["packets"] - rx0["packets"] == k  # nothing else talks in this namespace
    assert snap["interface"] == "lo"
    assert snap["delta_rx_packets"] == k and snap["delta_tx_packets"] == k
    assert snap["delta_rx_bytes"] == rx1["bytes"] - rx0["bytes"]
    assert snap["delta_tx_bytes"] == tx1["bytes"] - tx0["bytes"]
    assert snap["delta_rx_dropped"] == 0 and snap["delta_rx_errors"] == 0
    # lo has no ethtool statistics at all: the allowance counters are unknown, not 0
    for key in ("delta_bw_in_allowance_exceeded", "delta_bw_out_allowance_exceeded",
                "delta_pps_allowance_exceeded", "delta_conntrack_allowance_exceeded"):
        assert snap[key] is None


def test_default_interface_is_the_default_routes(netns):
    netns.run("ip", "link", "add", "hnva", "type", "veth", "peer", "name", "hnvb")
    netns.run("ip", "addr", "add", "10.99.0.1/24", "dev", "hnva")
    netns.run("ip", "link", "set", "hnva", "up")
    netns.run("ip", "link", "set", "hnvb", "up")
    netns.run("ip", "route", "add", "default", "via", "10.99.0.2", "dev", "hnva")
    snap, _, _ = netns.hostnet("-e", "stage", count=2)
    assert snap["interface"] == "hnva" and snap["env"] == "stage"
    assert snap["delta_rx_packets"] is not None
    # veth has ethtool statistics, but no cloud allowance counters among them
    stats = netns.run("ethtool", "-S", "hnva").stdout
    assert "peer_ifindex" in stats and "allowance" not in stats
    assert snap["delta_bw_in_allowance_exceeded"] is None and snap["delta_pps_allowance_exceeded"] is None


def test_no_default_route_still_snapshots(netns):
    snap, _, err = netns.hostnet(count=2)
    assert snap["interface"] is None and snap["delta_rx_bytes"] is None
    assert "no default route" in err


def test_columns_mode(netns):
    p = netns.run(tool_path("hostnet"), "-c", "2", "-i", "0.2", "--interface", "lo", timeout=60)
    lines = p.stdout.splitlines()
    assert lines[0].split()[:3] == ["TIME", "EST_IN", "EST_OUT"]
    assert len(lines) == 3
    assert "Hit Ctrl-C to end." in p.stderr
    # the default table fits 120 columns; -w adds packets and the allowance counters
    assert max(len(l) for l in lines) <= 120 and "RX_B/S" in lines[0] and "RX_PKTS" not in lines[0]
    wide = netns.run(tool_path("hostnet"), "-w", "-c", "1", "--interface", "lo", timeout=60).stdout.splitlines()
    assert wide[0].split()[-7:] == ["RX_PKTS", "TX_PKTS", "RX_DROP", "BWIN_EXC", "BWOUT_EXC", "PPS_EXC", "CT_EXC"]
    assert len(wide[1].split()) == len(wide[0].split())


@pytest.mark.parametrize("args,message", [
    (["--interface", "nosuchif0"], "no interface 'nosuchif0'"),
    (["-i", "0"], "invalid --interval '0'"),
    (["-i", "-1"], "invalid --interval '-1'"),
    (["-i", "soon"], "invalid --interval 'soon'"),
    (["-c", "0"], "invalid --count '0'"),
    (["--procs", ","], "invalid --procs"),
    (["--procs", "a_name_longer_than_comm"], "at most 15 characters"),
])
def test_bad_input_exits_2(netns, args, message):
    p = netns.run(tool_path("hostnet"), *args, check=False, timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert p.stderr.startswith("hostnet: ") and message in p.stderr, p.stderr


def test_works_under_nsenter(netns):
    # nsenter --net switches the network namespace but keeps the host's /sys: hostnet
    # must still read the namespace (its listeners, its lo), not the host
    spec = dict(SPEC, est4=0, est6=0, tw4=0, tw6=0, close_wait=0, syn_recv=0, syn_sent=0)
    target = start_target(netns, "hostnet_sockets.py", json.dumps(spec))
    try:
        p = run(["nsenter", "--net=/run/netns/" + netns.name, tool_path("hostnet"), "-j", "-c", "2",
                 "-i", "0.2", "--interface", "lo"], check=False, timeout=60)
    finally:
        stop_target(target)
    assert p.returncode == 0, p.stderr
    snap = json.loads(p.stdout.splitlines()[1])
    assert snap["listen"] == 3 and snap["tcp_sockets"] == 3
    assert snap["interface"] == "lo" and snap["delta_rx_packets"] == 0


def test_count_1_is_one_snapshot_at_once(netns):
    """`hostnet -c 1` as vmstat: the snapshot comes at once (not one 30 s interval later),
    with the states; deltas and rates need an interval, so they start with the second."""
    t0 = time.time()
    p = netns.run(tool_path("hostnet"), "-j", "-c", "1", "--interface", "lo", check=False, timeout=60)
    took = time.time() - t0
    assert p.returncode == 0, p.stderr
    snaps = [json.loads(l) for l in p.stdout.splitlines() if '"host_net_health"' in l]
    assert len(snaps) == 1 and took < 10, (took, p.stdout)  # the default interval is 30 s
    first = snaps[0]
    assert first["listen"] == 0 and first["interface"] == "lo"
    assert first["interval_s"] is None
    assert first["delta_rx_packets"] is None and first["rx_bytes_per_s"] is None


def sys_stat(ns, dev, name):
    return int(ns.run("cat", "/sys/class/net/%s/statistics/%s" % (dev, name)).stdout)


def test_bytes_per_second_match_sys_statistics_over_the_interval(netns):
    """A veth into a second namespace, UDP of known size both ways between two snapshots:
    RX_B/S and TX_B/S are the interval's /sys/class/net/DEV/statistics deltas over
    interval_s; the allowance-exceeded counters, which veth lacks, stay null."""
    peer = Netns()
    try:
        netns.run("ip", "link", "add", "hnra", "type", "veth", "peer", "name", "hnrb", "netns", peer.name)
        # fixed neighbours and no IPv6: no ARP or ND chatter, only our datagrams cross
        ends = ((netns, "hnra", "10.98.0.1", "02:00:00:00:98:01", "10.98.0.2", "02:00:00:00:98:02"),
                (peer, "hnrb", "10.98.0.2", "02:00:00:00:98:02", "10.98.0.1", "02:00:00:00:98:01"))
        for ns, dev, ip, mac, other_ip, other_mac in ends:
            ns.run("sysctl", "-q", "-w", "net.ipv6.conf.%s.disable_ipv6=1" % dev)
            ns.run("ip", "link", "set", dev, "address", mac)
            ns.run("ip", "addr", "add", ip + "/24", "dev", dev)
            ns.run("ip", "link", "set", dev, "up")
            ns.run("ip", "neigh", "replace", other_ip, "lladdr", other_mac, "dev", dev, "nud", "permanent")
        k, size = 200, 1000
        tool = netns.popen(tool_path("hostnet"), "-j", "-c", "2", "-i", "3", "--interface", "hnra",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = json.loads(tool.stdout.readline())
            t0 = time.time()
            rx0, tx0 = sys_stat(netns, "hnra", "rx_bytes"), sys_stat(netns, "hnra", "tx_bytes")
            recv = peer.popen(PY, "-c", "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                              "s.bind(('10.98.0.2',9999)); print('ready',flush=True)\n"
                              "for _ in range(%d): d,a=s.recvfrom(2000); s.sendto(d[:%d],a)" % (k, size // 2),
                              stdout=subprocess.PIPE, text=True)
            assert recv.stdout.readline().strip() == "ready"
            netns.run(PY, "-c", "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                      "s.settimeout(5)\n"
                      "for _ in range(%d): s.sendto(b'x'*%d,('10.98.0.2',9999)); s.recvfrom(2000)" % (k, size))
            recv.wait(timeout=10)
            rx1, tx1 = sys_stat(netns, "hnra", "rx_bytes"), sys_stat(netns, "hnra", "tx_bytes")
            sent_in = time.time() - t0
            out, err = tool.communicate(timeout=60)
        finally:
            if tool.poll() is None:
                tool.kill()
                tool.wait()
        if sent_in > 2.5:
            pytest.skip("the machine was too slow to send within the interval (%.1f s)" % sent_in)
        second = json.loads(out.splitlines()[0])
        assert first["rx_bytes_per_s"] is None and second["metric"] == "host_net_health"
        # the known traffic: k datagrams each way, IP + UDP + Ethernet headers on top
        assert rx1 - rx0 == k * (size // 2 + 42) and tx1 - tx0 == k * (size + 42)
        assert second["delta_rx_bytes"] == rx1 - rx0 and second["delta_tx_bytes"] == tx1 - tx0
        assert 2.5 < second["interval_s"] < 4.5
        assert second["rx_bytes_per_s"] == pytest.approx((rx1 - rx0) / second["interval_s"], rel=1e-3)  # interval_s is printed in ms
        assert second["tx_bytes_per_s"] == pytest.approx((tx1 - tx0) / second["interval_s"], rel=1e-3)  # interval_s is printed in ms
        assert second["delta_bw_in_allowance_exceeded"] is None
    finally:
        peer.close()
