#!/bin/sh
# make demo: start the demo Python workload, run three tools against it, stop.
set -eu
build=${1:-build}
here=$(dirname "$0")
python=$(command -v python3)
"$python" "$here/demo_workload.py" 30 &
workload=$!
trap 'kill $workload 2>/dev/null || true' EXIT INT TERM
sleep 1
echo "== pystack -p $workload -d 5: where the workload spends its CPU, in Python frames" >&2
"$build/pystack" -p "$workload" -d 5
echo "== pygc -p $workload --min-ms 1 -d 5: garbage-collection pauses over 1 ms" >&2
"$build/pygc" -p "$workload" --min-ms 1 -d 5
echo "== tcphandshake -p $workload -d 3: each request is a new loopback connection" >&2
"$build/tcphandshake" -p "$workload" -d 3
kill $workload 2>/dev/null || true
wait $workload 2>/dev/null || true
