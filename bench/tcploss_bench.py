"""tcploss vs BCC's tcpretrans under a retransmit storm, both tracing at the same time.

usage: tcploss_bench.py TCPLOSS SECONDS FLOWS LOSS_PCT [ROUNDS]

A netns pair (veth, offloads off) with nft dropping LOSS_PCT% of the data segments, and
FLOWS connections sending flat out for SECONDS. Both tracers run unfiltered, side by
side, writing to files. Ground truth: the client namespace's TcpRetransSegs (nstat).

tcploss runs with --connections: its per-connection table is counted in the kernel, so it stays
exact when the perf buffer overflows. Reported per tool: events seen on the storm's flows, events lost (reported by the tool
itself), the CPU its own process used (user + system, /proc/PID/stat) and the CPU its
BPF programs used (kernel.bpf_stats_enabled run_time_ns: that time is spent in softirq
on behalf of the traffic and is charged to nobody's process), and the ratios. Each
round is a storm of its own; the last lines are the costs per retransmit (per hit of
tcp:tcp_retransmit_skb: every BPF program of the tool, its retransmit program alone,
its process), median [min-max] over the rounds.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STORM = os.path.join(HERE, "tcploss_storm.py")
PORT = 9000
CLK = os.sysconf("SC_CLK_TCK")


def sh(cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True).stdout


def cpu_s(pid):
    """User + system CPU seconds of a process and its live children (BCC runs python3)."""
    total = 0.0
    pids = [pid]
    try:
        pids += [int(c) for c in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            f = open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(f[11]) + int(f[12])) / CLK
    return total


def bpf_ns(pid):
    """run_time_ns, run_cnt over the BPF programs pid holds (fdinfo), and run_cnt by name."""
    seen, ns, cnt, misses = set(), 0, 0, {}
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            info = dict(l.split(":", 1) for l in open("/proc/%d/fdinfo/%s" % (pid, fd)) if ":" in l)
        except OSError:
            continue
        prog = info.get("prog_id")
        if prog is None or int(prog) in seen:
            continue
        seen.add(int(prog))
        ns += int(info.get("run_time_ns", "0"))
        cnt += int(info.get("run_cnt", "0"))
        misses[int(prog)] = int(info.get("recursion_misses", "0"))
    progs = json.loads(sh(["bpftool", "-j", "prog", "show"]) or "[]")
    # the kernel keeps 15 characters of a name: a program and its __backup can share
    # one, so each is named with its id
    by_name = {"%s#%d" % (p["name"], p["id"]): p.get("run_cnt", 0) for p in progs if p["id"] in seen}
    by_name.update({"%s#%d:ns" % (p["name"], p["id"]): p.get("run_time_ns", 0) for p in progs if p["id"] in seen})
    missed = {"%s#%d" % (p["name"], p["id"]): misses[p["id"]] for p in progs if p["id"] in seen}
    return ns, cnt, by_name, missed


def wait_banner(path, proc, what, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            if "Hit Ctrl-C to end" in f.read():
                return
        if proc.poll() is not None:
            raise SystemExit("%s exited during start-up: %s" % (what, open(path).read()[-2000:]))
        time.sleep(0.2)
    raise SystemExit("%s did not start" % what)


def storm_round(tcploss, seconds, flows, loss):
    """One storm with both tracers: prints its table, returns its costs per retransmit."""
    tag = "%d" % (os.getpid() % 100000)
    cns, sns = "pyctlb" + tag, "pystlb" + tag
    net = "10.79.%d" % (os.getpid() % 250)
    cip, sip = net + ".1", net + ".2"
    tmp = "/tmp/tcploss_bench." + tag
    os.makedirs(tmp, exist_ok=True)
    old_stats = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    procs = []
    try:
        for ns in (cns, sns):
            sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", "vc", "netns", cns, "type", "veth", "peer", "name", "vs", "netns", sns])
        for ns, dev, ip in ((cns, "vc", cip), (sns, "vs", sip)):
            sh(["ip", "-n", ns, "addr", "add", ip + "/24", "dev", dev])
            sh(["ip", "-n", ns, "link", "set", dev, "up"])
            sh(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"],
               check=False)
        sh(["ip", "netns", "exec", sns, "nft",
            "add table inet t; add chain inet t in { type filter hook input priority 0; }; "
            "add rule inet t in tcp dport %d tcp flags & (syn | fin | rst) == 0 ip length > 100 "
            "numgen random mod 100 < %d counter drop" % (PORT, loss)])

        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        out_a, err_a = os.path.join(tmp, "tcploss.out"), os.path.join(tmp, "tcploss.err")
        out_b, err_b = os.path.join(tmp, "tcpretrans.out"), os.path.join(tmp, "tcpretrans.err")
        a = subprocess.Popen([tcploss, "-j", "--connections"], stdout=open(out_a, "w"), stderr=open(err_a, "w"))
        procs.append(a)
        b = subprocess.Popen(["tcpretrans-bpfcc"], stdout=open(out_b, "w"), stderr=open(err_b, "w"),
                             env=dict(os.environ, PYTHONUNBUFFERED="1"))
        procs.append(b)
        wait_banner(err_a, a, "tcploss")
        # tcpretrans prints its banner on stdout
        wait_banner(out_b, b, "tcpretrans-bpfcc")
        time.sleep(1)

        server = subprocess.Popen(["ip", "netns", "exec", sns, sys.executable, STORM, "server", sip,
                                   str(PORT), str(flows)], stdout=subprocess.PIPE, text=True)
        procs.append(server)
        assert server.stdout.readline().strip() == "listening"
        nstat = lambda: int(re.search(r"TcpRetransSegs\s+(\d+)", sh(
            ["ip", "netns", "exec", cns, "nstat", "-asz", "TcpRetransSegs"])).group(1))
        # ftrace counts the tracepoint's hits too: a third witness beside the two tools
        ftrace = "/sys/kernel/tracing/instances/pyebpf_tcploss_bench"
        os.makedirs(ftrace, exist_ok=True)
        with open(ftrace + "/buffer_size_kb", "w") as f:
            f.write("131072")
        with open(ftrace + "/events/tcp/tcp_retransmit_skb/enable", "w") as f:
            f.write("1")
        r0 = nstat()
        cpu0 = (cpu_s(a.pid), cpu_s(b.pid))
        bpf0 = (bpf_ns(a.pid), bpf_ns(b.pid))
        t0 = time.monotonic()
        subprocess.run(["ip", "netns", "exec", cns, sys.executable, STORM, "client", sip, str(PORT),
                        str(flows), str(seconds)], check=True)
        wall = time.monotonic() - t0
        server.wait(timeout=60)
        r1 = nstat()
        with open(ftrace + "/events/tcp/tcp_retransmit_skb/enable", "w") as f:
            f.write("0")
        with open(ftrace + "/trace") as f:
            fired_ftrace = sum(1 for l in f if "tcp_retransmit_skb:" in l)
        overrun = sum(int(l.split()[1]) for c in os.listdir(ftrace + "/per_cpu")
                      for l in open(ftrace + "/per_cpu/%s/stats" % c) if l.startswith("overrun:"))
        time.sleep(1)  # let both drain what the storm left in their buffers
        cpu1 = (cpu_s(a.pid), cpu_s(b.pid))
        bpf1 = (bpf_ns(a.pid), bpf_ns(b.pid))
        drops = int(re.search(r"counter packets (\d+)", sh(
            ["ip", "netns", "exec", sns, "nft", "list", "table", "inet", "t"])).group(1))
        for p in (a, b):
            p.send_signal(signal.SIGINT)
        for p in (a, b):
            p.wait(timeout=120)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old_stats)
        if os.path.isdir("/sys/kernel/tracing/instances/pyebpf_tcploss_bench"):
            os.rmdir("/sys/kernel/tracing/instances/pyebpf_tcploss_bench")
        for p in procs:
            if p.poll() is None:
                p.kill()
        for ns in (cns, sns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    # tcploss: its own events on the storm's flows, and what it says it lost
    seen_a = segs_a = 0
    summary = {}
    all_a = table_segs = 0
    for line in open(out_a):
        e = json.loads(line)
        if e.get("metric") == "tcploss_summary":
            summary = e
            continue
        if e.get("metric") == "tcp_loss_connection":
            if e["src_ip"] == cip and e["dst_port"] == PORT:
                table_segs += e["retransmit_segments"]
            continue
        all_a += e.get("event") == "retransmit"
        if e.get("event") == "retransmit" and e["src_ip"] == cip and e["dst_port"] == PORT:
            seen_a += 1
            segs_a += e["segments"]
    failed_a = summary.get("retransmit_failed", 0)
    lost_a = summary.get("lost", -1)
    # tcpretrans: one line per tracepoint hit "TIME PID IP LADDR:LPORT T> RADDR:RPORT STATE"
    lines_b = [l for l in open(out_b) if " R> " in l or " L> " in l]
    seen_b = sum(1 for l in lines_b if (" %s:" % cip) in l and (":%d " % PORT) in l)
    def delta(i, j, key):
        return bpf1[i][j].get(key, 0) - bpf0[i][j].get(key, 0)

    # every hit of the tracepoint while the storm ran, host-wide (other traffic included):
    # each of tcploss's two programs on it runs or is skipped at every hit
    fired_a = max([delta(0, 2, k) + delta(0, 3, k) for k in bpf1[0][3] if k.startswith("tcp_retransmit_")] or [0])
    fired_b = sum(v for k, v in bpf1[1][2].items() if not k.endswith(":ns")) - \
        sum(v for k, v in bpf0[1][2].items() if not k.endswith(":ns"))

    def per_prog(i):
        """{program: (runs, ns)} during the storm."""
        b0, b1 = bpf0[i][2], bpf1[i][2]
        return {k: (b1[k] - b0.get(k, 0), b1[k + ":ns"] - b0.get(k + ":ns", 0))
                for k in b1 if not k.endswith(":ns")}
    # runs the kernel skipped because another BPF program was running on that CPU (a
    # skipped tcploss program has a backup, or is one: the summary's "missed" is what
    # neither saw)
    miss_a = sum(bpf1[0][3].values()) - sum(bpf0[0][3].values())
    miss_b = sum(bpf1[1][3].values()) - sum(bpf0[1][3].values())
    lost_b = sum(int(m) for m in re.findall(r"Possibly lost (\d+) samples", open(out_b).read() +
                                             open(err_b).read()))
    truth = r1 - r0
    rate = truth / seconds  # the senders run for exactly SECONDS once connected
    cpu = (cpu1[0] - cpu0[0], cpu1[1] - cpu0[1])
    bpf = ((bpf1[0][0] - bpf0[0][0]) / 1e9, (bpf1[1][0] - bpf0[1][0]) / 1e9)
    runs = (bpf1[0][1] - bpf0[0][1], bpf1[1][1] - bpf0[1][1])

    print("   storm: %d flows, %d%% of data segments dropped by nft (%d drops), %.1f s" % (flows, loss, drops, wall))
    print("   truth: TcpRetransSegs %d in the client netns = %.0f retransmitted segments/s over the %.0f s of sending" % (
        truth, rate, seconds))
    print("   %-22s %12s %12s" % ("", "tcploss", "tcpretrans"))
    print("   %-22s %12d %12d" % ("events on the flows", seen_a, seen_b))
    print("   %-22s %12d %12s" % ("  segments in them", segs_a, "-"))
    print("   %-22s %12d %12s" % ("  failed (err < 0)", failed_a, "(included)"))
    print("   %-22s %12d %12d" % ("events lost (reported)", lost_a, lost_b))
    print("   %-22s %12d %12d" % ("tracepoint hits (all)", fired_a, fired_b))
    print("   %-22s %12d %12s" % ("  as ftrace saw them", fired_ftrace,
                                   "(%d overrun)" % overrun if overrun else ""))
    print("   %-22s %12d %12d" % ("  printed (all)", all_a, len(lines_b)))
    print("   %-22s %12s %12s" % ("  printed+lost+failed", "%d" % (all_a + lost_a + failed_a), "%d" % (len(lines_b) + lost_b)))
    print("   %-22s %12d %12d" % ("runs skipped (nested)", miss_a, miss_b))
    print("   %-22s %12.2f %12.2f" % ("process CPU s", cpu[0], cpu[1]))
    print("   %-22s %12.1f %12.1f" % ("  us per printed event", cpu[0] * 1e6 / max(all_a, 1), cpu[1] * 1e6 / max(len(lines_b), 1)))
    print("   %-22s %12.3f %12.3f" % ("BPF CPU s", bpf[0], bpf[1]))
    print("   %-22s %12d %12d" % ("BPF runs", runs[0], runs[1]))
    print("   %-22s %12.0f %12.0f" % ("BPF ns per run", bpf[0] * 1e9 / max(runs[0], 1), bpf[1] * 1e9 / max(runs[1], 1)))
    for name, (n, t) in sorted(per_prog(0).items(), key=lambda kv: -kv[1][1]):
        if n:
            print("   tcploss   %-38s %8d runs %8.3f s %6.0f ns/run %6d skipped" % (
                name, n, t / 1e9, t / n, delta(0, 3, name)))
    for name, (n, t) in sorted(per_prog(1).items(), key=lambda kv: -kv[1][1]):
        if n:
            print("   tcpretrans %-37s %8d runs %8.3f s %6.0f ns/run" % (name, n, t / 1e9, t / n))
    print("   ratios tcploss/tcpretrans: process CPU %.2f, BPF CPU %.2f, total CPU %.2f" % (
        cpu[0] / max(cpu[1], 1e-9), bpf[0] / max(bpf[1], 1e-9), (cpu[0] + bpf[0]) / max(cpu[1] + bpf[1], 1e-9)))
    print("   accuracy: tcploss segments %d vs TcpRetransSegs %d (%s); tcpretrans counts skbs: %d (%+.1f%%)" % (
        segs_a, truth, "exact" if segs_a == truth else "differs by %+d" % (segs_a - truth), seen_b,
        100.0 * (seen_b - truth) / max(truth, 1)))
    print("   tcploss --connections table (counted in the kernel): %d segments on the flows (%s; missed %s)" % (
        table_segs, "exact" if table_segs == truth else "differs by %+d" % (table_segs - truth), summary.get("missed")))
    print("   tcploss summary: %s" % json.dumps({k: v for k, v in summary.items() if k != "metric"}))
    if rate < 20000:
        print("   note: the storm reached %.0f/s, below the 20k/s target (a loaded machine)" % rate)
    retrans_prog = lambda i: sum(t for name, (n, t) in per_prog(i).items() if "retransmit" in name)
    return {"rate": rate,
            "bpf": (bpf[0] * 1e9 / max(fired_a, 1), bpf[1] * 1e9 / max(fired_b, 1)),
            "prog": (retrans_prog(0) / max(fired_a, 1), retrans_prog(1) / max(fired_b, 1)),
            "cpu": (cpu[0] * 1e9 / max(fired_a, 1), cpu[1] * 1e9 / max(fired_b, 1))}


def spread(v):
    return "%6.0f [%.0f-%.0f]" % (statistics.median(v), min(v), max(v))


def main():
    tcploss, seconds, flows, loss = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    res = []
    for r in range(rounds):
        print("   -- round %d of %d" % (r + 1, rounds), flush=True)
        res.append(storm_round(tcploss, seconds, flows, loss))
    print("   per retransmit, median [min-max] over %d rounds (storms of %s retransmits/s):" % (
        rounds, spread([x["rate"] for x in res]).strip()))
    print("   %-34s %20s %20s %14s" % ("ns", "tcploss", "tcpretrans", "ratio"))
    for key, what in (("bpf", "BPF, all programs"), ("prog", "BPF, retransmit program"),
                      ("cpu", "process CPU"), (None, "BPF + process CPU")):
        a = [x[key][0] if key else x["bpf"][0] + x["cpu"][0] for x in res]
        b = [x[key][1] if key else x["bpf"][1] + x["cpu"][1] for x in res]
        print("   %-34s %20s %20s %14s" % (what, spread(a), spread(b),
                                           "%.2f" % statistics.median(x / y for x, y in zip(a, b) if y)))


if __name__ == "__main__":
    main()
