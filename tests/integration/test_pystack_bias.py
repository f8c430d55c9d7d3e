"""pystack's samples without bias: three callers in a row (tests/targets/py_three.py)
that time themselves with time.thread_time_ns(), on pyenv 3.12, sampled at several
rates, in the cases where a fixed period locks onto the loop: a loop driven by a timer
of the sampling period (--tick: at 100 and 200 Hz pystack with a fixed period gave the
callers shares 22 to 27 points off, and 43% too many samples), and a free-running loop
that takes about one period (999 Hz). pystack's shares of the callers must stay within
1.5 points of the targets' own timing, or within three standard errors of a share from
that many random samples, sqrt(p (1 - p) / n), when that is wider: random instants
cannot do better (1.5 points is three standard errors of a 40% share only from 9,600
samples on; at 3,000 it is 2.7 points). Its sample count must match the targets' CPU
time times the rate (the random periods keep the mean).

Three targets run at once (two CPUs), their samples and their timings pooled.
"""
import json
import math
import os
import signal
import time

import pytest

from conftest import TARGETS
from test_pystack import Targets, iso_time, parse_stack, pystack, pythons, cpu_seconds  # noqa: F401

CALLERS = ("first", "second", "third")
# each caller's share of a loop: 40/35/25, so that the shares differ by position and size
SPLIT = (0.40, 0.35, 0.25)
NS_PER_ITERATION = 55  # work()'s loop on pyenv 3.12 on this VM, measured


@pytest.fixture
def targets():
    t = Targets()
    yield t
    t.stop_all()


def loop_args(hz, tick):
    """Iterations of each caller: one loop takes about one sampling period, or with a
    timer tick (ms) 55% of it, the rest asleep."""
    total = (0.55 * tick * 1e6 if tick else 1e9 / hz) / NS_PER_ITERATION
    return (["--tick", str(tick)] if tick else []) + [str(int(total * s)) for s in SPLIT]


@pytest.mark.parametrize("hz,tick,min_samples", [(100, 10, 3000), (200, 5, 3000), (999, None, 8000)])
def test_shares_match_the_targets_own_timing(pystack, pythons, targets, hz, tick, min_samples):
    py = pythons.get("pyenv-3.12")
    if not py:
        pytest.skip("pyenv 3.12 not found by pythons.sh")
    procs = [targets.start(py + [os.path.join(TARGETS, "py_three.py")] + loop_args(hz, tick)) for _ in range(3)]
    t = pystack([p.pid for p in procs], "-F", str(hz))
    for p in procs:
        p.send_signal(signal.SIGUSR1)
    begin = time.time()
    cpu0 = {p.pid: cpu_seconds(p.pid) for p in procs}
    # until enough samples (each a line), 150 s at most (a loaded machine gives fewer)
    deadline = begin + 150
    while time.time() < deadline and len(t.lines) < min_samples * 1.1 + 200:
        time.sleep(1)
    end = time.time()
    cpu = sum(cpu_seconds(p.pid) - cpu0[p.pid] for p in procs)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    truth = dict.fromkeys(CALLERS, 0)
    for p in procs:
        out, _ = p.communicate(timeout=60)
        for k, v in json.loads(out.decode().strip().splitlines()[-1]).items():
            truth[k] += v
    t.stop()
    assert t.returncode == 0, t.stderr
    counts = dict.fromkeys(CALLERS, 0)
    for e in t.events("py_stack"):
        if not begin + 0.02 <= iso_time(e["time"]) <= end - 0.02:
            continue
        funcs = [f for f, _, _ in parse_stack(e["stack"])]
        for c in CALLERS:
            if c in funcs:
                counts[c] += 1
                break
    n = sum(counts.values())
    all_ns = sum(truth.values())
    rows = ["%s: pystack %.2f%% target %.2f%%" % (c, 100 * counts[c] / max(n, 1), 100 * truth[c] / all_ns)
            for c in CALLERS]
    report = "%d Hz, target %s: %d samples in %.1f s, %.0f expected from %.2f CPU s\n%s" % (
        hz, " ".join(loop_args(hz, tick)), n, end - begin, cpu * hz, cpu, "\n".join(rows))
    print(report)
    assert n >= min_samples, report
    for c in CALLERS:
        p = truth[c] / all_ns
        assert abs(counts[c] / n - p) <= max(0.015, 3 * math.sqrt(p * (1 - p) / n)), report
    # the random periods keep the rate: samples within -15% (the VM's timer misses some:
    # pystack(8), OVERHEAD) and +5% of CPU time x rate
    assert 0.85 * cpu * hz <= n <= 1.05 * cpu * hz, report
