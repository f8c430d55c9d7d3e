#!/bin/sh
# pymonitor (the eight trackers in one process) next to the eight tools as separate
# processes: start-up to ready and RSS (ready.py), and the time to each tracker's
# first event with the RSS of everything running (first_events.py). Targets of the
# issue: RSS <= 250 MB, every tracker's first event within 15 s.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${PYMONITOR_BENCH_ROUNDS:-3}

spin=$(mktemp)
trap 'kill $spinner 2>/dev/null || true; rm -f "$spin"' EXIT
echo 'while True: pass' > "$spin"
/usr/bin/python3 "$spin" & spinner=$!

echo "   -- eight trackers on -p PID: pymonitor, eight tools"
/usr/bin/python3 "$here/ready.py" "$rounds" pymonitor "$build/pymonitor -p $spinner" \
	tools "$build/tcphandshake -p $spinner ;; $build/tcploss -p $spinner ;; $build/hostnet ;; $build/pystack -p $spinner ;; $build/pygc -p $spinner ;; $build/pyhandoff -p $spinner ;; $build/pygil -p $spinner ;; $build/pyoffcpu -p $spinner"
echo "   -- first event of each tracker"
/usr/bin/python3 "$here/first_events.py" "$rounds" "$build"
