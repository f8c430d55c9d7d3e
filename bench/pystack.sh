#!/bin/sh
# pystack: throughput of CPU-bound Python workloads (1 and 4 threads, stack depth 30)
# while pystack samples them at 99 Hz, over their throughput without, windows
# interleaved in one run; and the BPF program's own cost per sample (bpf_stats) at
# stack depths 30 and 120.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
py=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
[ -n "$py" ] || py=/usr/bin/python3.11
exec /usr/bin/python3 "$here/pystack_bench.py" "$build/pystack" "$py" \
	"${PYSTACK_BENCH_ROUNDS:-5}" "${PYSTACK_BENCH_SECONDS:-4}"
