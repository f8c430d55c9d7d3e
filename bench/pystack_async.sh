#!/bin/sh
# pystack --async: an asyncio service with 1,000 live tasks (request-like chains of
# three coroutines) whose loop counts work units, with "pystack --async -F 99" reading
# it over without, windows interleaved in one run: task reads per second, pystack's CPU
# per task sampled, and the service's throughput ratio (pystack_async_bench.py says how).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
exec /usr/bin/python3 "$here/pystack_async_bench.py" "$build/pystack" "$py" \
	"${PYSTACK_ASYNC_BENCH_ROUNDS:-3}" "${PYSTACK_ASYNC_BENCH_SECONDS:-4}" "${PYSTACK_ASYNC_BENCH_TASKS:-1000}"
