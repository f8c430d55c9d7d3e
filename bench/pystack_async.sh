#!/bin/sh
# pystack --async: an asyncio service with 1,000 live tasks (request-like chains of
# three coroutines) whose loop counts work units, with "pystack --async -F 99" reading
# it over without, windows interleaved in one run: task reads per second, pystack's CPU
# per task sampled, and the service's throughput ratio (pystack_async_bench.py says how).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
py=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
[ -n "$py" ] || py=/usr/bin/python3.11
exec /usr/bin/python3 "$here/pystack_async_bench.py" "$build/pystack" "$py" \
	"${PYSTACK_ASYNC_BENCH_ROUNDS:-3}" "${PYSTACK_ASYNC_BENCH_SECONDS:-4}" "${PYSTACK_ASYNC_BENCH_TASKS:-1000}"
