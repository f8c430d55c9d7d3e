#!/bin/sh
# make demo: start the demo Python workload, run a tool against it for a few seconds, stop.
set -eu
build=${1:-build}
here=$(dirname "$0")
python=$(command -v python3)
"$python" "$here/demo_workload.py" 12 &
workload=$!
trap 'kill $workload 2>/dev/null || true' EXIT INT TERM
sleep 1
echo "== tcphandshake -p $workload -d 8 (each request is a new connection to the workload)" >&2
"$build/tcphandshake" -p "$workload" -d 8
wait $workload
