"""Two different trackers in one process, through the one runner
(tests/integration/trackers_in_one.c): tcphandshake and pystack, each checked against
its own ground truth, and tcphandshake counting exactly what it counts alone.

Ground truths: tcp_connects.py reports the client port of every connection it made;
py_busyline.py spins on one known line, and the kernel's CPU accounting of the target
says how many 99 Hz samples it can have had.
"""
import os
import subprocess
import time

from conftest import TARGETS, Tool
from test_pystack import busy_line, cpu_seconds, parse_stack
from test_tcphandshake import finish_connector, start_connector

N = 300
HZ = 99
PYTHON = "/usr/bin/python3.11"  # Debian's, installed by make deps


def connects_seen(tool, result):
    """(connect ports, accept ports) of the connector's own listener, sorted."""
    port = result["port"]
    return (sorted(e["src_port"] for e in tool.events("tcp_connect") if e["dst_port"] == port),
            sorted(e["src_port"] for e in tool.events("tcp_accept") if e["dst_port"] == port))


def test_tcphandshake_and_pystack_in_one_process(run_tool):
    script = os.path.join(TARGETS, "py_busyline.py")
    busy = subprocess.Popen([PYTHON, script], stdout=subprocess.PIPE)
    try:
        assert busy.stdout.readline().strip() == b"ready"

        # tcphandshake alone: the count to match
        p, hello = start_connector(N, "4")
        alone = run_tool("tcphandshake", "-p", str(hello["pid"]))
        result_alone = finish_connector(p)
        time.sleep(0.5)
        alone.stop()
        assert alone.returncode == 0, alone.stderr

        # the same work, with pystack sampling a busy interpreter in the same process
        p, hello = start_connector(N, "4")
        both = Tool("tests/trackers_in_one",
                    ["tcphandshake", "-j", "-p", str(hello["pid"]), "--",
                     "pystack", "-p", str(busy.pid), "-F", str(HZ)], json_mode=False)
        both.json_mode = True  # -j is the first tracker's option here, not the first argument
        both.wait_ready()
        cpu0 = cpu_seconds(busy.pid)
        result = finish_connector(p)
        # two seconds of the target's CPU, however loaded the machine is
        deadline = time.time() + 30
        while cpu_seconds(busy.pid) - cpu0 < 2 and time.time() < deadline:
            time.sleep(0.2)
        cpu1 = cpu_seconds(busy.pid)
        both.stop()
        assert both.returncode == 0, both.stderr
    finally:
        busy.kill()
        busy.wait()

    # tcphandshake: every connection once, as alone
    for tool, res in ((alone, result_alone), (both, result)):
        connects, accepts = connects_seen(tool, res)
        assert connects == sorted(res["client_ports"]) == accepts
        [summary] = tool.events("tcphandshake_summary")
        assert summary["lost"] == 0 and summary["events"] >= N * 2
    assert len(connects_seen(both, result)[0]) == len(connects_seen(alone, result_alone)[0]) == N
    assert all(e["pid"] == e["container_pid"] == hello["pid"] for e in both.events("tcp_connect")
               if e["dst_port"] == result["port"])

    # pystack: the busy line, and as many samples as the target's CPU time allows
    samples = [e for e in both.events("py_stack") if e["pid"] == busy.pid]
    line = busy_line(script)
    assert samples
    for e in samples:
        assert e["status"] == "complete", e
        assert (e["leaf_func"], e["leaf_file"], e["leaf_line"]) == ("spin", script, line)
        assert [f for f, _, _ in parse_stack(e["stack"])][-3:] == ["outer", "Holder.middle", "spin"]
        assert e["container_pid"] == e["pid"]
    # samples taken while both ran: at least a few seconds of one busy CPU
    expected = (cpu1 - cpu0) * HZ
    assert expected > HZ, "the target got too little CPU to judge (%.1f s)" % (cpu1 - cpu0)
    assert 0.5 * expected <= len(samples) <= 1.5 * (expected + HZ * 2), (len(samples), expected)
    [summary] = both.events("pystack_summary")
    assert summary["lost"] == 0
