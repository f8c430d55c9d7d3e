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
# BCC alone cannot find Debian's split headers: give it a merged tree (as tcphandshake.sh)
common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1)
arch=$(ls -d "${common%-common}"-amd64 2>/dev/null || true)
if [ -z "$common" ] || [ -z "$arch" ]; then
	echo "   skipped: no /usr/src/linux-headers-*-{common,amd64} for BCC"
	exit 0
fi
merged=$(mktemp -d)
trap 'rm -rf "$merged"' EXIT
mkdir -p "$merged/include" "$merged/arch/x86/include"
for d in "$common"/include/* "$arch"/include/*; do ln -s "$d" "$merged/include/"; done
for d in "$common"/arch/x86/include/* "$arch"/arch/x86/include/*; do ln -s "$d" "$merged/arch/x86/include/"; done
# 16 flows, 30% of data segments dropped, 6 s: about 20-30k retransmits/s here
BCC_KERNEL_SOURCE=$merged /usr/bin/python3 "$here/tcploss_bench.py" "$build/tcploss" 6 16 30
