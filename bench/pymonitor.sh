#!/bin/sh
# pymonitor (the six trackers in one process) next to the six tools as separate
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

echo "   -- six trackers on -p PID: pymonitor, six tools"
/usr/bin/python3 "$here/ready.py" "$rounds" pymonitor "$build/pymonitor -p $spinner" \
	tools "$build/tcphandshake -p $spinner ;; $build/tcploss -p $spinner ;; $build/hostnet ;; $build/pystack -p $spinner ;; $build/pygc -p $spinner ;; $build/pyhandoff -p $spinner"
echo "   -- first event of each tracker"
/usr/bin/python3 "$here/first_events.py" "$rounds" "$build"
