"""The timed-caller workload of the CPU-split targets (py_split.py, py_profile.py,
py_three.py, bench/pystack_peers.py): callers run in turn, forever, each timed by the
target itself with its thread's CPU clock: the ground truth a profiler's shares are held
against.

The loop that calls them stays in the target's own frame: forever() only hands out the
next caller and reads the clock around the call, so a profiler sees the target's stacks
("<module>;a;work") as if the loop were written out there:

    timed = TimedCallers([("a", a), ("b", b)])
    serve(timed, wait="--wait" in sys.argv)
    for call in timed.forever():
        call()
"""
import json
import signal
import sys
import time


class TimedCallers:
    def __init__(self, callers, clock=time.thread_time, log_path=None, tick_ms=None):
        """callers: (name, function) in the order they run; clock: time.thread_time
        (seconds) or time.thread_time_ns; log_path: at the end, one line per call
        "name start_ns end_ns" in CLOCK_MONOTONIC; tick_ms: each round starts at the
        next multiple of tick_ms of CLOCK_MONOTONIC and sleeps for the rest."""
        self.callers = list(callers)
        self.clock = clock
        self.zero = clock() * 0  # 0.0 or 0: the clock's type
        self.spent = dict((name, self.zero) for name, _ in self.callers)
        self.log_path = log_path
        self.log = [] if log_path else None
        self.tick_ns = int(tick_ms * 1e6) if tick_ms else None
        self.loops = 0  # rounds of every caller

    def restart(self, signum=None, frame=None):
        """The measurement starts afresh (SIGUSR1)."""
        for name in self.spent:
            self.spent[name] = self.zero
        if self.log is not None:
            del self.log[:]

    def stop(self, signum=None, frame=None):
        """Writes the log, prints the time each caller spent as JSON and exits (SIGTERM)."""
        if self.log is not None:
            with open(self.log_path, "w") as f:
                f.write("".join("%s %d %d\n" % e for e in self.log))
        print(json.dumps(self.spent), flush=True)
        sys.exit(0)

    def forever(self):
        """Each caller in turn, for the loop to call, forever; the clock's time from
        the hand-out to the next call of this is added to the caller's spent."""
        clock, mono, log, tick_ns = self.clock, time.monotonic_ns, self.log, self.tick_ns
        while True:
            if tick_ns:
                time.sleep((tick_ns - mono() % tick_ns) / 1e9)
            m0 = mono() if log is not None else 0
            for name, call in self.callers:
                t0 = clock()
                yield call
                # no call between the read and the write of spent: a signal handler
                # (restart) may run after any call, and its zero would be overwritten
                dt = clock() - t0
                self.spent[name] += dt
                if log is not None:
                    m1 = mono()
                    log.append((name, m0, m1))
                    m0 = m1
            self.loops += 1


def serve(timed, wait, restart=True):
    """SIGTERM ends the target (timed.stop), SIGUSR1 restarts the measurement (when
    restart); prints "ready", then with wait reads a line of stdin before it returns, so
    that profilers attached before see exactly the measured window."""
    signal.signal(signal.SIGTERM, timed.stop)
    if restart:
        signal.signal(signal.SIGUSR1, timed.restart)
    print("ready", flush=True)
    if wait:
        sys.stdin.readline()
