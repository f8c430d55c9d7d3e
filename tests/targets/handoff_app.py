"""WSGI app for pyhandoff tests (gunicorn gthread and uwsgi).

HANDOFF_SLEEP_MS: how long each request sleeps (default 0).
HANDOFF_SPIN_MS: how long each request runs on the CPU, in spin() (default 0).
HANDOFF_LOG: if set, one line per request is appended to this file:
  "<thread name> <start wall time> <wait ms>" where wait is handler start minus
  the client's X-Sent header (wall-clock seconds), when the client sent one.
"""
import os
import threading
import time

SLEEP = float(os.environ.get("HANDOFF_SLEEP_MS", "0")) / 1000.0
SPIN = float(os.environ.get("HANDOFF_SPIN_MS", "0")) / 1000.0
LOG = os.environ.get("HANDOFF_LOG")
_lock = threading.Lock()


def spin(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += sum(i * i for i in range(200))
    return n


def app(environ, start_response):
    start = time.time()
    sent = environ.get("HTTP_X_SENT")
    if LOG:
        wait = "%.3f" % ((start - float(sent)) * 1000.0) if sent else "-"
        with _lock, open(LOG, "a") as f:
            f.write("%s %.6f %s\n" % (threading.current_thread().name, start, wait))
    if SLEEP:
        time.sleep(SLEEP)
    if SPIN:
        spin(SPIN)
    body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


application = app
