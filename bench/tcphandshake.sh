#!/bin/sh
# tcphandshake vs BCC's tcpstates (Python front end): time to the first event and RSS.
set -eu
build=${1:-build}
here=$(dirname "$0")
if ! command -v tcpstates-bpfcc >/dev/null; then
	echo "   skipped: tcpstates-bpfcc is not installed (apt-get install bpfcc-tools)"
	exit 0
fi
. "$here/bcc_headers"
/usr/bin/python3 "$here/startup.py" 5 \
	tcphandshake "$build/tcphandshake" tcpstates tcpstates-bpfcc
