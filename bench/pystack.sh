#!/bin/sh
# pystack: BPF time per target sample (depth 30, 120) and per other run at 99 and 499 Hz
# next to BCC profile -F 99, start-up next to profile's, then throughput of CPU-bound
# Python workloads (1 and 4 threads, stack depth 30) while pystack samples them at
# 99 Hz, over their throughput without, windows interleaved (pystack_bench.py says how).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
# headers for profile-bpfcc only: pystack would use them too, and start slower
. "$here/bcc_headers"
export PROFILE_KERNEL_SOURCE="$BCC_KERNEL_SOURCE"
unset BCC_KERNEL_SOURCE
/usr/bin/python3 "$here/pystack_bench.py" "$build/pystack" "$py" \
	"${PYSTACK_BENCH_ROUNDS:-3}" "${PYSTACK_BENCH_SECONDS:-4}"
