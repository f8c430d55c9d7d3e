"""asyncio target for pystack's task views (--async, the task field).

usage: py_tasks.py MODE [--uvloop]   (prints "ready" once its tasks run, then runs until
SIGTERM; on SIGTERM prints its ground truth as one JSON line)

  split  tasks cpu-a and cpu-b burn CPU in steps of 60 and 40 units; each step is
         measured with time.thread_time(): {"cpu-a": s, "cpu-b": s}. SIGUSR1 restarts
         the measurement.
  wait   three tasks wait in wait_db (an asyncio.sleep loop), one in wait_http (a read
         from a peer that answers after 1 s, again and again), and task gatherer
         awaits a gather() of gather-1 and gather-2 (each in leaf_wait): prints the
         lines {"wait_db": line, "wait_http": line, "leaf_wait": line, "gather_line": line}
  tree   63 tasks in a tree (fan-out 2, TaskGroups and gather by turns), all waiting
  churn  tasks created and finished at about 5,000 a second, each awaiting a child chain;
         prints {"created": n}
  short  tasks short-0, short-1, ... run one after the other, each burning the CPU in
         short_burn for SHORT_MS and then ending at once; prints on SIGTERM {"short":
         [[task, wall start, wall end], ...]}
  steps  on SIGUSR1, STEP_ROUNDS rounds of four tasks run one after the other: block-a
         and block-b block the loop thread in time.sleep (0.2 s, 0.1 s), spin burns the
         CPU for 0.15 s, gc-maker calls gc.collect(), each then ends (after a first
         task warm-up that blocks 0.1 s and collects once); then prints, without waiting for
         SIGTERM, {"steps": [[task, wall start, wall end], ...], "blocked": {task: s
         measured around its sleeps}, "gc": {task: collections its gc.callbacks saw
         begin while it was asyncio's current task ("" none)}, "step_block": line}
"""
import asyncio
import gc
import json
import signal
import socket
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "wait"
spent = {"cpu-a": 0.0, "cpu-b": 0.0}
truth = {}
stats = {"created": 0}


def work(n):
    s = 0
    for i in range(n):
        s += i
    return s


async def burn(name, units):
    clock = time.thread_time
    while True:
        t0 = clock()
        work(units * 1000)
        spent[name] += clock() - t0
        await asyncio.sleep(0)


async def wait_db():
    while True:
        await asyncio.sleep(0.05)  # WAIT_DB


async def wait_http(port):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    while True:
        w.write(b"?")
        await r.read(1)  # WAIT_HTTP


def slow_peer():
    """A server answering each byte after 1 s."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        c, _ = srv.accept()
        while c.recv(1):
            time.sleep(1)
            c.sendall(b"!")
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


async def leaf_wait():
    while True:
        await asyncio.sleep(0.1)  # LEAF_WAIT


async def gathered():
    first = asyncio.create_task(leaf_wait(), name="gather-1")
    second = asyncio.create_task(leaf_wait(), name="gather-2")
    await asyncio.gather(first, second)  # GATHER


async def tree_node(depth, width, path="t"):
    """Tasks named by their place in the tree (t, t.0, t.0.1, ...)."""
    if depth == 0:
        await leaf_wait()
        return
    names = ["%s.%d" % (path, i) for i in range(width)]
    if depth % 2:
        async with asyncio.TaskGroup() as tg:
            for n in names:
                tg.create_task(tree_node(depth - 1, width, n), name=n)
    else:
        await asyncio.gather(*[asyncio.create_task(tree_node(depth - 1, width, n), name=n) for n in names])


async def churn_child(n):
    if n:
        await churn_child(n - 1)
    else:
        await asyncio.sleep(0)


async def churn():
    while True:
        t0 = time.monotonic()
        batch = [asyncio.create_task(churn_child(3)) for _ in range(50)]
        stats["created"] += len(batch)
        await asyncio.gather(*batch)
        # about 5,000 a second: 50 per 10 ms
        await asyncio.sleep(max(0.0, 0.01 - (time.monotonic() - t0)))


STEP_ROUNDS = 5
gc_by_task = {}


def count_gc(phase, info):
    if phase != "start":
        return
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop in this thread
        task = None
    name = task.get_name() if task else ""
    gc_by_task[name] = gc_by_task.get(name, 0) + 1


# Each step's task ends right after its measured part: the tools read the records
# later (much later when the host is busy: 8 targets spin on 2 CPUs), and name the task
# from what the BPF walk read at the event.
LIVE_ON = 0


SHORT_MS = 4
short_runs = []


async def short_burn():
    t0 = time.monotonic()
    while time.monotonic() - t0 < SHORT_MS / 1000:
        work(200)


async def short_tasks():
    for i in range(1000000):
        w0 = time.time()
        await asyncio.create_task(short_burn(), name="short-%d" % i)
        short_runs.append(["short-%d" % i, w0, time.time()])


async def step_block(seconds):
    t0 = time.monotonic()
    time.sleep(seconds)  # STEP_BLOCK
    took = time.monotonic() - t0
    await asyncio.sleep(LIVE_ON)
    return took


async def step_spin(seconds):
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        work(1000)
    await asyncio.sleep(LIVE_ON)
    return 0.0


async def step_gc():
    gc.collect()
    await asyncio.sleep(LIVE_ON)
    return 0.0


async def warm_up():
    time.sleep(0.1)
    gc.collect()
    await asyncio.sleep(0.05)


async def steps(go):
    await go.wait()
    # a first event of each kind: the tools load this process's symbols on their first
    # record, which delays the next ones (tests leave task warm-up out)
    w0 = time.time()
    await asyncio.create_task(warm_up(), name="warm-up")
    done_steps, blocked = [["warm-up", w0, time.time()]], {"block-a": 0.0, "block-b": 0.0}
    await asyncio.sleep(0.3)
    for _ in range(STEP_ROUNDS):
        for name, coro in (("block-a", step_block(0.2)), ("block-b", step_block(0.1)),
                           ("spin", step_spin(0.15)), ("gc-maker", step_gc())):
            w0 = time.time()
            took = await asyncio.create_task(coro, name=name)
            done_steps.append([name, w0, time.time()])
            if name in blocked:
                blocked[name] += took
            await asyncio.sleep(0.03)
    print(json.dumps({"steps": done_steps, "blocked": blocked, "gc": dict(gc_by_task),
                      "step_block": lines_of("STEP_BLOCK")["STEP_BLOCK"]}), flush=True)


def lines_of(*marks):
    out = {}
    with open(__file__, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            for m in marks:
                if "# " + m in line and not line.lstrip().startswith('"'):
                    out[m] = i
    return out


async def main():
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: spent.update({"cpu-a": 0.0, "cpu-b": 0.0}))
    tasks = []
    if MODE == "split":
        tasks = [asyncio.create_task(burn("cpu-a", 60), name="cpu-a"),
                 asyncio.create_task(burn("cpu-b", 40), name="cpu-b")]
    elif MODE == "wait":
        port = slow_peer()
        tasks = [asyncio.create_task(wait_db(), name="db-%d" % i) for i in range(3)]
        tasks.append(asyncio.create_task(wait_http(port), name="http"))
        tasks.append(asyncio.create_task(gathered(), name="gatherer"))
        ls = lines_of("WAIT_DB", "WAIT_HTTP", "LEAF_WAIT", "GATHER")
        truth.update({"wait_db": ls["WAIT_DB"], "wait_http": ls["WAIT_HTTP"],
                      "leaf_wait": ls["LEAF_WAIT"], "gather_line": ls["GATHER"]})
    elif MODE == "tree":
        tasks = [asyncio.create_task(tree_node(5, 2), name="t")]
    elif MODE == "churn":
        tasks = [asyncio.create_task(churn(), name="churner")]
    elif MODE == "short":
        tasks = [asyncio.create_task(short_tasks(), name="driver")]
    elif MODE == "steps":
        go = asyncio.Event()
        gc.callbacks.append(count_gc)
        loop.add_signal_handler(signal.SIGUSR1, go.set)
        tasks = [asyncio.create_task(steps(go), name="driver")]
    await asyncio.sleep(0.3)
    print("ready", flush=True)
    await done.wait()
    for t in tasks:
        t.cancel()
    out = dict(truth)
    if MODE == "split":
        out.update(spent)
    if MODE == "churn":
        out.update(stats)
    if MODE == "short":
        out["short"] = short_runs
    print(json.dumps(out), flush=True)


if "--uvloop" in sys.argv:
    import uvloop
    uvloop.install()
done = None


async def entry():
    global done
    done = asyncio.Event()
    await main()

asyncio.run(entry())
