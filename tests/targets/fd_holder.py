"""A process that holds a known number of open fds under a known limit.

Usage: fd_holder.py COMM N SOFT_LIMIT. Renames itself to COMM (so a test can find it
by name among other Python processes), lowers its soft RLIMIT_NOFILE, opens N
descriptors on /dev/null, prints "ready" and holds them until stdin closes.
"""
import os
import resource
import sys

comm, n, soft = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open("/proc/self/comm", "w") as f:
    f.write(comm)
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(n)]
print("ready", flush=True)
sys.stdin.read()
