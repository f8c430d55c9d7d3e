#!/bin/sh
# tcploss vs BCC's tcpretrans under a retransmit storm in a netns pair: events seen,
# events lost, process and BPF CPU, side by side in one run (bench/tcploss_bench.py).
set -eu
build=${1:-build}
here=$(dirname "$0")
if ! command -v tcpretrans-bpfcc >/dev/null; then
	echo "   skipped: tcpretrans-bpfcc is not installed (apt-get install bpfcc-tools)"
	exit 0
fi
. "$here/bcc_headers"
# 16 flows, 30% of data segments dropped, 6 s: about 20-30k retransmits/s here
/usr/bin/python3 "$here/tcploss_bench.py" "$build/tcploss" 6 16 30 "${TCPLOSS_BENCH_ROUNDS:-3}"
