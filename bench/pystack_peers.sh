#!/bin/sh
# pystack at 99 and 999 Hz next to CPython 3.15's own profiler (profiling.sampling, cpu
# mode, 99 Hz and 1 kHz) and BCC's profile -F 999, on one anchor workload on sid's
# python3.15: target throughput, profiler CPU, a() share (pystack_peers.py says how).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
py=$("$here/../tests/targets/pythons.sh" | awk -F '\t' '$1 == "sid-3.15" { print $2 }')
if [ -z "$py" ]; then
	echo "   skipped: no sid python3.15 (tests/targets/pythons.sh fetches it)"
	exit 0
fi
# headers for profile-bpfcc only: pystack would use them too, and start slower
. "$here/bcc_headers"
export PROFILE_KERNEL_SOURCE="$BCC_KERNEL_SOURCE"
unset BCC_KERNEL_SOURCE
/usr/bin/python3 "$here/pystack_peers.py" "$build/pystack" "$py" \
	"${PYSTACK_PEERS_ROUNDS:-5}" "${PYSTACK_PEERS_SECONDS:-10}"
