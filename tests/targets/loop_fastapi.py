"""A FastAPI app under uvicorn (Debian's python3-fastapi, python3-uvicorn), the way a
new user writes one, for pyloop's tests:

    /block  calls legacy_client_call(), a blocking time.sleep(0.2) inside async def
    /cpu    renders a report for ~150 ms on the CPU inside async def
    /good   awaits asyncio.sleep(0.05): the loop stays free

    loop_fastapi.py PORT

Prints "ready" once uvicorn listens. Each /block and /cpu request logs one JSON line
to stdout: the endpoint, time.time() when the blocking part began and its seconds.
"""
import asyncio
import json
import sys
import threading
import time

import uvicorn
from fastapi import FastAPI

app = FastAPI()


def legacy_client_call():
    time.sleep(0.2)  # BLOCK


def render_report():
    end = time.monotonic() + 0.15
    rows = []
    while time.monotonic() < end:  # CPU
        rows.append(json.dumps({"n": len(rows), "v": [1, 2, 3]}))
    return len(rows)


def log(what, wall, t0):
    print(json.dumps({"endpoint": what, "wall": wall, "seconds": time.monotonic() - t0}), flush=True)


@app.get("/block")
async def block():
    wall, t0 = time.time(), time.monotonic()
    legacy_client_call()
    log("block", wall, t0)
    return {"ok": True}


@app.get("/cpu")
async def cpu():
    wall, t0 = time.time(), time.monotonic()
    n = render_report()
    log("cpu", wall, t0)
    return {"rows": n}


@app.get("/good")
async def good():
    await asyncio.sleep(0.05)
    return {"ok": True}


def main():
    port = int(sys.argv[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio")
    server = uvicorn.Server(config)

    def say_ready():
        while not server.started:
            time.sleep(0.02)
        print("ready", flush=True)

    threading.Thread(target=say_ready, daemon=True).start()
    server.run()


if __name__ == "__main__":
    main()
