#!/bin/sh
# tcphandshake vs BCC's tcpstates (Python front end): time to the first event and RSS.
set -eu
build=${1:-build}
here=$(dirname "$0")
if ! command -v tcpstates-bpfcc >/dev/null; then
	echo "   skipped: tcpstates-bpfcc is not installed (apt-get install bpfcc-tools)"
	exit 0
fi
# BCC alone cannot find Debian's split headers (it fails to start here): give it the
# same merged tree tcphandshake builds for itself.
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
BCC_KERNEL_SOURCE=$merged /usr/bin/python3 "$here/startup.py" 5 \
	tcphandshake "$build/tcphandshake" tcpstates tcpstates-bpfcc
