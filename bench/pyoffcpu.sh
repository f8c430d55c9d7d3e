#!/bin/sh
# pyoffcpu: throughput of a switch-heavy Python workload (threads handing tokens
# through queues) with pyoffcpu in events mode and in folded mode, over its throughput
# without, windows interleaved in one run; and the BPF time per context switch
# (bpf_stats) for a host whose switches are not the target's, and for the workload.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
exec /usr/bin/python3 "$here/pyoffcpu_bench.py" "$build/pyoffcpu" "$py" \
	"${PYOFFCPU_BENCH_ROUNDS:-4}" "${PYOFFCPU_BENCH_SECONDS:-3}"
