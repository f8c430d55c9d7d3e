"""tcploss against real TCP trouble in a netns pair: nft loss, blackholes, RSTs, zero windows.

Ground truth comes from the kernel's own per-netns counters (nstat), nft rule counters
and the endpoints' own reports (tests/targets/tcp_trouble.py), never from the tool.
"""
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import (TARGETS, assert_fields_documented, assert_nothing_left, bpf_progs_of, run,
                      tool_path)

TROUBLE = os.path.join(TARGETS, "tcp_trouble.py")
PORT = "8080"


def nstat(ns, pair, *names):
    """Absolute values of kernel SNMP counters inside netns ns (nstat -a, history untouched)."""
    out = pair.ns(ns, "nstat", "-asz", *names).stdout
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in names:
            vals[parts[0]] = int(parts[1])
    return [vals.get(n, 0) for n in names]


def start(pair, ns, *args, stdin=None):
    p = pair.popen(ns, [sys.executable, TROUBLE] + [str(a) for a in args], stdout=subprocess.PIPE,
                   stdin=stdin, text=True)
    return p


def said(p, timeout=120):
    """The next JSON line the target printed (bounded wait: a stuck target fails the test)."""
    import select
    if not select.select([p.stdout], [], [], timeout)[0]:
        p.kill()
        raise AssertionError("target said nothing for %d s" % timeout)
    line = p.stdout.readline()
    assert line, "target exited early (rc=%s)" % p.poll()
    return json.loads(line)


def nft(pair, ns, rules):
    pair.ns(ns, "nft", rules)


def nft_counter(pair, ns):
    out = pair.ns(ns, "nft", "list", "table", "inet", "t").stdout
    m = re.search(r"counter packets (\d+)", out)
    return int(m.group(1)) if m else 0


def wall(e):
    return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def of(tool, kind, **match):
    return [e for e in tool.events("tcp_loss")
            if e["event"] == kind and all(e[k] == v for k, v in match.items())]


def transfer(run_tool, ns, cip, sip):
    """3 MiB from client to server under tcploss; the tool (stopped), the client's hello,
    nft's drops, TcpRetransSegs before and after, the retransmit events, their segments
    and the summary."""
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", cip, "--connections")
    before, = nstat(ns.client, ns, "TcpRetransSegs")
    drops0 = nft_counter(ns, ns.server)
    server = start(ns, ns.server, "sink", sip, PORT)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "send", sip, PORT, 3 * 1024 * 1024)
    hello = said(client)
    assert said(client)["event"] == "sent"
    client.wait(timeout=120)
    got = said(server)
    server.wait(timeout=30)
    assert got["bytes"] == 3 * 1024 * 1024
    time.sleep(0.5)
    after, = nstat(ns.client, ns, "TcpRetransSegs")
    drops = nft_counter(ns, ns.server) - drops0
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    retrans = of(tool, "retransmit", src_ip=cip)
    segments = sum(e["segments"] for e in retrans)
    summary = tool.events("tcploss_summary")[0]
    print("drops=%d TcpRetransSegs=%d events=%d segments=%d summary=%s" % (
        drops, after - before, len(retrans), segments, summary))
    return tool, hello, drops, before, after, retrans, segments, summary


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_retransmitted_segments_equal_the_clients_TcpRetransSegs(run_tool, netns_pair, family):
    """nft drops 10% of data segments: every retransmitted segment is counted, and owned."""
    ns = netns_pair
    cip, sip = (ns.client_ip, ns.server_ip) if family == "ipv4" else (ns.client_ip6, ns.server_ip6)
    length = "ip length > 100" if family == "ipv4" else "ip6 length > 80"  # data, not bare ACKs
    nft(ns, ns.server, "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
        "add rule inet t in tcp dport %s tcp flags & (syn | fin | rst) == 0 %s "
        "numgen random mod 10 == 0 counter drop" % (PORT, length))
    tool, hello, drops, before, after, retrans, segments, summary = transfer(run_tool, ns, cip, sip)
    assert drops > 50  # the fault really happened
    assert summary["lost"] == 0 and summary["retransmit_segments"] == segments
    # the kernel counts a retransmitted segment in TcpRetransSegs exactly where the
    # tracepoint fires with err >= 0; early give-ups (err < 0) are counted in neither.
    # The one way to differ: the kernel skipped our program because another BPF
    # tracing program (anyone's) was running on that CPU; the summary counts those.
    if summary["missed"] == 0:
        assert segments == after - before
    else:
        assert 0 <= (after - before) - segments <= 4 * summary["missed"]
    # every drop had to be repaired; a repair may itself be dropped, or be spurious
    assert after - before >= drops
    for e in retrans:
        assert e["pid"] == hello["pid"] and e["tid"] == hello["pid"]
        # outside a PID namespace the container ids are the host ids
        assert e["container_pid"] == e["pid"] and e["container_tid"] == e["tid"]
        assert e["comm"].startswith("python")
        assert e["src_port"] == hello["sport"] and e["dst_ip"] == sip
        assert e["dst_port"] == int(PORT) and e["family"] == family
        assert e["segments"] >= 1 and e["snd_cwnd"] >= 1 and e["tcp_state"]
        assert 0 < e["srtt_us"] < 1000000
    # total_retrans is the socket's own running count: it ends at (at least) our sum
    assert max(e["total_retrans"] for e in retrans) >= segments - retrans[-1]["segments"]
    conns = tool.events("tcp_loss_connection")
    mine = [c for c in conns if c["src_port"] == hello["sport"]]
    assert len(mine) == 1 and mine[0]["retransmit_segments"] == segments
    assert mine[0]["retransmits"] == len(retrans) and mine[0]["pid"] == hello["pid"]
    assert_fields_documented("tcploss", tool.events("tcp_loss") + conns)


def test_retransmit_storm_table_equals_TcpRetransSegs(run_tool, netns_pair):
    """16 flows sending flat out for 3 s through 30% loss: tens of thousands of
    retransmits a second, far more than the perf buffers carry. The --connections
    table is counted in the kernel: its segments equal the client's TcpRetransSegs."""
    ns = netns_pair
    nft(ns, ns.server, "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
        "add rule inet t in tcp dport %s tcp flags & (syn | fin | rst) == 0 ip length > 100 "
        "numgen random mod 100 < 30 counter drop" % PORT)
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip, "--connections")
    before, = nstat(ns.client, ns, "TcpRetransSegs")
    server = start(ns, ns.server, "sinks", ns.server_ip, PORT, 16)
    assert said(server)["event"] == "listening"
    t0 = time.monotonic()
    client = start(ns, ns.client, "storm", ns.server_ip, PORT, 16, 3)
    sports = set(said(client)["sports"])
    sent = said(client)["bytes"]
    seconds = time.monotonic() - t0
    assert said(server)["bytes"] == sent
    client.wait(timeout=60)
    server.wait(timeout=60)
    time.sleep(0.5)
    after, = nstat(ns.client, ns, "TcpRetransSegs")
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    summary = tool.summary()
    rows = [c for c in tool.events("tcp_loss_connection") if c["src_port"] in sports]
    table = sum(c["retransmit_segments"] for c in rows)
    print("TcpRetransSegs=%d table=%d rows=%d in %.1f s; summary=%s" % (
        after - before, table, len(rows), seconds, summary))
    assert after - before > 10000 * seconds / 3  # a storm, even on a loaded machine
    assert len(rows) == 16
    if summary["missed"] == 0:
        assert table == after - before
    else:  # the kernel ran neither program of a pair for a hit (see tcploss(8))
        assert 0 <= (after - before) - table <= 4 * summary["missed"]


def test_locally_dropped_retransmits_are_events_and_TCPRetransFail(run_tool, netns_pair):
    """What the man page says adds up: nft drops 10% of data at the server (real loss,
    so retransmits) and 20% of the client's own outgoing data segments (netfilter
    returns -EPERM after the kernel counted the retransmit: a copy dropped locally).
    The retransmit events' segments are the client's TcpRetransSegs, and those whose
    copy was dropped locally are its TCPRetransFail."""
    ns = netns_pair
    rule = ("tcp dport %s tcp flags & (syn | fin | rst) == 0 ip length > 100 numgen random mod %d == 0 "
            "counter drop")
    nft(ns, ns.server, "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
        "add rule inet t in " + rule % (PORT, 10))
    nft(ns, ns.client, "add table inet t; add chain inet t out { type filter hook output priority 0; }; "
        "add rule inet t out " + rule % (PORT, 5))
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip)
    before = nstat(ns.client, ns, "TcpRetransSegs", "TcpExtTCPRetransFail")
    server = start(ns, ns.server, "sink", ns.server_ip, PORT)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "send", ns.server_ip, PORT, 512 * 1024)
    hello = said(client)
    assert said(client, timeout=120)["event"] == "sent"
    client.wait(timeout=60)
    assert said(server)["bytes"] == 512 * 1024
    server.wait(timeout=30)
    time.sleep(0.5)
    after = nstat(ns.client, ns, "TcpRetransSegs", "TcpExtTCPRetransFail")
    local_drops = nft_counter(ns, ns.client)
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    summary = tool.summary()
    segments = sum(e["segments"] for e in of(tool, "retransmit", src_port=hello["sport"]))
    retrans, fail = after[0] - before[0], after[1] - before[1]
    print("TcpRetransSegs=%d TCPRetransFail=%d local_drops=%d segments=%d summary=%s" % (
        retrans, fail, local_drops, segments, summary))
    # retransmitted copies really were dropped locally. nft counts packets, TCPRetransFail
    # segments (a GSO packet is several), so fail may exceed local_drops; the events whose
    # copy was dropped are packets nft dropped (with the originals it dropped too)
    assert fail > 0 and 0 < summary["retransmit_dropped"] <= local_drops
    assert summary["lost"] == 0 and summary["retransmit_segments"] == segments
    if summary["missed"] == 0:
        assert segments == retrans
        assert summary["retransmit_dropped_segments"] == fail
    else:  # the kernel skipped our program: another BPF program was running on that CPU
        assert 0 <= retrans - segments <= 4 * summary["missed"]
    assert summary["retransmit_dropped"] <= summary["retransmit_dropped_segments"]


def test_interval_tables_add_up_to_the_kernels_count(run_tool, netns_pair):
    """-i 0.5: a table every half second, each with its own interval's counts.

    A sender paced at 1 KiB per 10 ms (300 KiB, about 3 s) through 10% loss retransmits
    in several intervals; the tables' rows are in time order, one per interval at most,
    and add up to the events and to the client's TcpRetransSegs."""
    ns = netns_pair
    nft(ns, ns.server, "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
        "add rule inet t in tcp dport %s tcp flags & (syn | fin | rst) == 0 ip length > 100 "
        "numgen random mod 10 == 0 counter drop" % PORT)
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip, "-i", "0.5")
    before, fail0 = nstat(ns.client, ns, "TcpRetransSegs", "TcpExtTCPRetransFail")
    server = start(ns, ns.server, "sink", ns.server_ip, PORT)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "send", ns.server_ip, PORT, 300 * 1024, 0.01)
    hello = said(client)
    client.wait(timeout=120)
    server.wait(timeout=30)
    time.sleep(0.5)
    after, fail1 = nstat(ns.client, ns, "TcpRetransSegs", "TcpExtTCPRetransFail")
    tool.stop()
    assert tool.returncode == 0, tool.stderr
    summary = tool.summary()
    segments = sum(e["segments"] for e in of(tool, "retransmit", src_port=hello["sport"]))
    rows = [c for c in tool.events("tcp_loss_connection") if c["src_port"] == hello["sport"]]
    times = [wall(c) for c in rows]
    print("TcpRetransSegs=%d segments=%d rows=%s" % (after - before, segments, rows))
    assert len(rows) >= 3 and times == sorted(times) and len(set(times)) == len(times)
    assert all(b - a >= 0.4 for a, b in zip(times, times[1:]))
    assert all(c["retransmit_segments"] + c["losses"] > 0 and c["pid"] == hello["pid"] for c in rows)
    assert sum(c["retransmit_segments"] for c in rows) == segments == summary["retransmit_segments"]
    # a copy the local stack dropped after the kernel counted it (a full veth backlog
    # on a loaded machine) is still a retransmit event: the sum stays exact
    if summary["missed"] == 0:
        assert segments == after - before
        assert summary["retransmit_dropped_segments"] == fail1 - fail0
    else:
        assert 0 <= (after - before) - segments <= 4 * summary["missed"]


def test_blackholed_flow_enters_loss(run_tool, netns_pair):
    """Every packet to the server dropped for 3 s: the sender's RTO fires, it enters Loss."""
    ns = netns_pair
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip)
    t0, = nstat(ns.client, ns, "TcpExtTCPTimeouts")
    server = start(ns, ns.server, "sink", ns.server_ip, PORT)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "send", ns.server_ip, PORT, 700 * 1024, 0.01)
    hello = said(client)
    time.sleep(1)
    hole_start = time.time()
    nft(ns, ns.server, "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
        "add rule inet t in tcp dport %s counter drop" % PORT)
    time.sleep(3)
    drops = nft_counter(ns, ns.server)
    ns.ns(ns.server, "nft", "delete", "table", "inet", "t")
    hole_end = time.time()
    assert said(client, timeout=120)["event"] == "sent"
    client.wait(timeout=60)
    assert said(server)["bytes"] == 700 * 1024
    t1, = nstat(ns.client, ns, "TcpExtTCPTimeouts")
    time.sleep(0.5)
    tool.stop()
    losses = of(tool, "loss", src_ip=ns.client_ip)
    print("drops=%d timeouts=%d losses=%s" % (drops, t1 - t0, losses))
    assert drops > 0 and t1 - t0 >= 1
    # one event per entry into Loss; repeated RTOs while in Loss are not new entries
    assert 1 <= len(losses) <= t1 - t0
    for e in losses:
        assert e["pid"] == hello["pid"] and e["src_port"] == hello["sport"]
        assert e["tcp_state"] == "ESTABLISHED"
        assert hole_start < wall(e) < hole_end + 0.5
        assert e["snd_cwnd"] >= 1 and e["lost_out"] >= 0
    # and the segments sent into the hole were retransmitted
    assert of(tool, "retransmit", src_port=hello["sport"])


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_connect_to_a_closed_port_resets(run_tool, netns_pair, family):
    ns = netns_pair
    cip, sip = (ns.client_ip, ns.server_ip) if family == "ipv4" else (ns.client_ip6, ns.server_ip6)
    tool = run_tool("tcploss", "--port", "9", "--filter-ip", cip)
    rst0, = nstat(ns.server, ns, "TcpOutRsts")
    client = start(ns, ns.client, "refused", sip, 9, "wait", stdin=subprocess.PIPE)
    truth = said(client)
    rst1, = nstat(ns.server, ns, "TcpOutRsts")
    time.sleep(0.5)
    tool.stop()  # the client still runs: its thread names can be read
    client.stdin.close()
    client.wait(timeout=30)
    assert truth["event"] == "refused" and rst1 - rst0 == 1
    received = of(tool, "reset_received")
    sent = of(tool, "reset_sent")
    assert len(received) == 1 and len(sent) == 1, tool.stdout
    r, s = received[0], sent[0]
    # the client's socket, owned by the connecting process
    assert r["src_ip"] == cip and r["dst_ip"] == sip and r["dst_port"] == 9
    assert r["pid"] == truth["pid"] and r["tcp_state"] == "SYN_SENT" and r["family"] == family
    assert r["thread_name"] == "MainThread"  # the Python client's main thread
    # the server had no socket for it: no owner, no state, the kernel's reason
    assert s["src_ip"] == sip and s["src_port"] == 9 and s["dst_port"] == r["src_port"]
    assert s["pid"] is None and s["comm"] is None and s["tcp_state"] is None
    assert s["thread_name"] is None
    assert s["reason"] == "NO_SOCKET"


@pytest.mark.parametrize("who", ["client", "server"])
def test_so_linger_zero_close_resets_the_peer(run_tool, netns_pair, who):
    """SO_LINGER {1,0} then close(): the closer sends a RST, the peer receives it."""
    ns = netns_pair
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip)
    rst_c0, = nstat(ns.client, ns, "TcpOutRsts")
    rst_s0, = nstat(ns.server, ns, "TcpOutRsts")
    server = start(ns, ns.server, "sink" if who == "client" else "linger_server", ns.server_ip, PORT)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "linger_client", ns.server_ip, PORT, stdin=subprocess.PIPE)
    hello = said(client)
    time.sleep(0.3)
    client.stdin.write("go\n" if who == "client" else "wait\n")
    client.stdin.flush()
    client_says = said(client)
    server_says = said(server)
    client.wait(timeout=30)
    server.wait(timeout=30)
    rst_c1, = nstat(ns.client, ns, "TcpOutRsts")
    rst_s1, = nstat(ns.server, ns, "TcpOutRsts")
    time.sleep(0.5)
    tool.stop()
    closer, peer = (client_says, server_says) if who == "client" else (server_says, client_says)
    closer_ip, peer_ip = (ns.client_ip, ns.server_ip) if who == "client" else (ns.server_ip, ns.client_ip)
    assert closer["event"] == "resetting" and peer["event"] == "reset"  # the endpoints agree
    assert (rst_c1 - rst_c0, rst_s1 - rst_s0) == ((1, 0) if who == "client" else (0, 1))
    sent = of(tool, "reset_sent")
    received = of(tool, "reset_received")
    assert len(sent) == 1 and len(received) == 1, tool.stdout
    assert sent[0]["src_ip"] == closer_ip and sent[0]["pid"] == closer["pid"]
    assert received[0]["src_ip"] == peer_ip and received[0]["pid"] == peer["pid"]
    assert received[0]["tcp_state"] == "ESTABLISHED"
    # the kernel names why it reset (6.10+): a name from its own table, not a number
    assert re.match(r"^[A-Z_0-9]+$", sent[0]["reason"]) and not sent[0]["reason"].isdigit()
    for e in sent + received:
        assert e["src_port"] in (hello["sport"], int(PORT)) and e["comm"].startswith("python")


def test_receiver_that_stops_reading_gives_one_zero_window_episode(run_tool, netns_pair):
    """A tiny receive buffer and no reads for 3 s: the sender sees a zero window until reads resume."""
    ns = netns_pair
    total = 1024 * 1024
    tool = run_tool("tcploss", "--port", PORT, "--filter-ip", ns.client_ip)
    adv0, = nstat(ns.server, ns, "TcpExtTCPToZeroWindowAdv")
    server = start(ns, ns.server, "stall", ns.server_ip, PORT, 3, total)
    assert said(server)["event"] == "listening"
    client = start(ns, ns.client, "send_wait", ns.server_ip, PORT, total)
    hello = said(client)
    assert said(server)["event"] == "accepted"
    reading = said(server)
    assert reading["event"] == "reading"
    assert said(server)["bytes"] == total
    assert said(client)["answer"] == "ok"
    client.wait(timeout=30)
    server.wait(timeout=30)
    adv1, = nstat(ns.server, ns, "TcpExtTCPToZeroWindowAdv")
    time.sleep(0.5)
    tool.stop()
    starts = of(tool, "zero_window", src_ip=ns.client_ip)
    ends = of(tool, "zero_window_end", src_ip=ns.client_ip)
    print("advertised=%d starts=%d ends=%s" % (adv1 - adv0, len(starts), [e["duration_ms"] for e in ends]))
    # once per episode: as often as the receiver went from an open to a zero window
    assert len(starts) == adv1 - adv0 >= 1
    assert len(ends) == len(starts)
    first, end = starts[0], ends[0]
    assert first["pid"] == hello["pid"] and first["src_port"] == hello["sport"]
    assert first["snd_wnd"] == 0 and first["tcp_state"] == "ESTABLISHED"
    # the episode ends when the receiver reads again (its window update, or the next probe)
    assert -0.05 < wall(end) - reading["time"] < 1.5
    assert 1500 < end["duration_ms"] < 4500
    assert abs(wall(end) - wall(first) - end["duration_ms"] / 1000) < 0.01
    assert tool.events("tcploss_summary")[0]["zero_windows_open"] == 0


def test_columns_mode_has_a_header(run_tool, netns_pair):
    ns = netns_pair
    tool = run_tool("tcploss", "--port", "9", "--filter-ip", ns.client_ip, "--connections", json_mode=False)
    client = start(ns, ns.client, "refused", ns.server_ip, 9)
    said(client)
    client.wait(timeout=30)
    time.sleep(0.5)
    tool.stop()
    lines = tool.stdout.splitlines()
    assert lines[0].split()[:5] == ["TIME", "EVENT", "PID", "COMM", "SRC"]
    rows = [l for l in lines[1:] if "reset_" in l]
    assert len(rows) == 2
    assert "NO_SOCKET" in tool.stdout
    table = lines.index("") + 1  # the table's time, then its header
    assert abs(wall({"time": lines[table]}) - time.time()) < 60
    assert lines[table + 1].split()[:3] == ["PID", "COMM", "SRC"]
    assert len(lines) == table + 2 + 2  # one row per connection side
    # the default table fits 120 columns (REASON, the last, is as long as the name)
    assert max(len(l) for l in lines) <= 120, lines
    assert "SRTT_US" not in lines[0] and "SPORT" not in lines[0]
    assert "Hit Ctrl-C to end." not in tool.stdout


@pytest.mark.parametrize("args,msg", [
    (["--filter-ip", "10.0.0.300"], "not an IPv4 or IPv6 address"),
    (["--filter-ip", "example.com"], "not an IPv4 or IPv6 address"),
    (["--port", "0"], "--port"),
    (["--port", "http"], "--port"),
    (["-d", "-1"], "duration"),
    (["--bogus"], "unknown option"),
    # -c is --count in pyebpf (hostnet); the per-connection table is --connections
    (["-c"], "unknown option '-c'"),
])
def test_bad_input_is_a_usage_error(args, msg):
    r = run([tool_path("tcploss")] + args, check=False)
    assert r.returncode == 2, r
    assert msg in r.stderr and r.stdout == ""


def test_ebpf_prints_the_program_with_its_offsets():
    r = run([tool_path("tcploss"), "--ebpf", "--port", "443", "--filter-ip", "::1"])
    assert "RAW_TRACEPOINT_PROBE(tcp_retransmit_skb)" in r.stdout
    assert "// cflag: -DPORT=443" in r.stdout and "// cflag: -DFILTER_IP_FAMILY=10" in r.stdout
    assert "-DOFF_TCP_SKB_CB_GSO_SEGS=" in r.stdout and "-DOFF_TCP_SOCK_SND_CWND=" in r.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_ends_with_summary_and_nothing_attached(run_tool, sig):
    tool = run_tool("tcploss")
    progs = bpf_progs_of(tool.proc.pid)
    assert len(progs) == 13  # one per tracepoint, and the backups of tcp_retransmit_skb and tcp_probe
    tool.stop(sig)
    assert tool.returncode == 0
    assert "summary" in tool.stderr and tool.events("tcploss_summary")
    assert_nothing_left(progs)


def test_pid_filter_keeps_only_that_processes_sockets(run_tool, netns_pair):
    """Two processes get refused; -p names one: only its reset_received is printed (the
    other's, and the server side's ownerless RSTs, are filtered out)."""
    ns = netns_pair
    # a process whose pid is known before tracing starts, and that connects on demand
    keeper = ns.popen(ns.client, [sys.executable, "-c",
                                  "import os,sys,socket\nprint(os.getpid(),flush=True)\nsys.stdin.readline()\n"
                                  "s=socket.socket()\ntry: s.connect((sys.argv[1],9))\nexcept OSError: pass\n"
                                  "print('done',flush=True)", ns.server_ip],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(keeper.stdout.readline())
    tool = run_tool("tcploss", "-p", str(pid), "--filter-ip", ns.client_ip)
    other = start(ns, ns.client, "refused", ns.server_ip, 9)
    truth = said(other)
    other.wait(timeout=30)
    keeper.stdin.write("go\n")
    keeper.stdin.flush()
    assert keeper.stdout.readline().strip() == "done"
    keeper.wait(timeout=30)
    time.sleep(0.5)
    tool.stop()
    assert truth["event"] == "refused" and truth["pid"] != pid
    events = tool.events("tcp_loss")
    assert [(e["event"], e["pid"]) for e in events] == [("reset_received", pid)], tool.stdout


def test_container_ids_in_a_pid_namespace(run_tool, netns_pair):
    """A client in its own PID namespace: pid is the host's, container_pid what it sees (1)."""
    ns = netns_pair
    tool = run_tool("tcploss", "--port", "9", "--filter-ip", ns.client_ip)
    p = ns.popen(ns.client, ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, TROUBLE,
                             "refused", ns.server_ip, "9"], stdout=subprocess.PIPE, text=True)
    truth = said(p)
    p.wait(timeout=30)
    time.sleep(0.5)
    tool.stop()
    assert truth["event"] == "refused" and truth["pid"] == 1  # what the process sees
    r = of(tool, "reset_received")
    assert len(r) == 1, tool.stdout
    assert r[0]["container_pid"] == 1 and r[0]["container_tid"] == 1
    assert r[0]["pid"] not in (None, 1) and r[0]["pid"] != p.pid  # the host's id (unshare forked)


@pytest.mark.parametrize("args", [
    [],
    ["--connections", "--filter-ip", "fd00::1"],
    ["--connections", "--filter-ip", "10.1.2.3", "--port", "80", "-p", "1", "-e", "x"],
])
def test_every_filter_combination_loads(args):
    """Each option adds BPF code: every combination must pass the verifier (512-byte stack)."""
    r = run([tool_path("tcploss"), "-d", "1"] + args, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "summary" in r.stderr


def test_stops_with_summary_when_its_only_target_exits(run_tool):
    target = subprocess.Popen(["sleep", "6"])
    tool = run_tool("tcploss", "-p", str(target.pid))
    target.wait()
    tool.proc.wait(timeout=30)
    tool.stop()
    assert tool.returncode == 0
    assert "target pid %d exited" % target.pid in tool.stderr
    assert tool.events("tcploss_summary")
