#!/bin/sh
# pyoffcpu: throughput of a switch-heavy Python workload (threads handing tokens
# through queues) with pyoffcpu in events mode and in folded mode, over its throughput
# without, windows interleaved in one run; and the BPF time per context switch
# (bpf_stats) for a host whose switches are not the target's, and for the workload.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
py=$(ls -d "$pyenv_root"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)
[ -n "$py" ] || py=/usr/bin/python3.11
exec /usr/bin/python3 "$here/pyoffcpu_bench.py" "$build/pyoffcpu" "$py" \
	"${PYOFFCPU_BENCH_ROUNDS:-4}" "${PYOFFCPU_BENCH_SECONDS:-3}"
