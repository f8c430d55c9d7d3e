#!/bin/sh
# pyloop: throughput of an asyncio echo ping-pong (a loop iteration per bounce) and of
# the same loop stalling 5 times a second, with pyloop over without, windows
# interleaved in one run; and the BPF time per loop iteration (bpf_stats).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
exec /usr/bin/python3 "$here/pyloop_bench.py" "$build/pyloop" "$py" \
	"${PYLOOP_BENCH_ROUNDS:-4}" "${PYLOOP_BENCH_SECONDS:-3}"
