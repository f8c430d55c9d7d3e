"""pystack target for --children: a parent that only waits, and CHILDREN (default 2)
Python child processes that burn CPU in child_work(). Prints the child pids as JSON.

usage: py_children.py [CHILDREN]
"""
import json
import subprocess
import sys
import time


def child_work():
    n = 0
    while True:
        n += 1


if len(sys.argv) > 1 and sys.argv[1] == "child":
    child_work()
else:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    kids = [subprocess.Popen([sys.executable, __file__, "child"]) for _ in range(count)]
    print(json.dumps([k.pid for k in kids]), flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        for k in kids:
            k.kill()
