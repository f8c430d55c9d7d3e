#!/bin/sh
# pyloop: throughput of an asyncio echo ping-pong (a loop iteration per bounce) and of
# the same loop stalling 5 times a second, with pyloop over without, windows
# interleaved in one run; and the BPF time per loop iteration (bpf_stats).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
py=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
[ -n "$py" ] || py=/usr/bin/python3.11
exec /usr/bin/python3 "$here/pyloop_bench.py" "$build/pyloop" "$py" \
	"${PYLOOP_BENCH_ROUNDS:-4}" "${PYLOOP_BENCH_SECONDS:-3}"
