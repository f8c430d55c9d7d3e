#!/bin/sh
# pymonitor (every tracker in one process) next to the tools as separate processes:
# start-up to ready and RSS (ready.py), and the time to each tracker's first event
# with the RSS of everything running (first_events.py), all compiling (no compile
# cache); then pymonitor compiling against pymonitor loading its programs from a
# warm compile cache. Targets of the issue: RSS <= 250 MB, every tracker's first
# event within 15 s, ready within 1.5 s. The tools are the trackers of the
# list (src/trackers/trackers.h), as trackers_in_one --list names them; each on
# -p PID when it takes one.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${PYMONITOR_BENCH_ROUNDS:-3}
names=$("$build/tests/trackers_in_one" --list) ||
	{ echo "pymonitor.sh: $build/tests/trackers_in_one --list failed (make bench builds it)" >&2; exit 1; }

spin=$(mktemp)
cache=$(mktemp -d)
trap 'kill $spinner 2>/dev/null || true; rm -rf "$spin" "$cache"' EXIT
# what each round compiles; the cache's own rounds below
export PYEBPF_CACHE_DIR=
echo 'while True: pass' > "$spin"
/usr/bin/python3 "$spin" & spinner=$!

tools=""
n=0
for t in $names; do
	args=""
	if "$build/$t" --help | grep -q -- '--pid'; then args=" -p $spinner"; fi
	tools="${tools:+$tools ;; }$build/$t$args"
	n=$((n + 1))
done

echo "   -- $n trackers on -p PID: pymonitor, $n tools"
/usr/bin/python3 "$here/ready.py" "$rounds" pymonitor "$build/pymonitor -p $spinner" tools "$tools"
echo "   -- first event of each tracker"
/usr/bin/python3 "$here/first_events.py" "$rounds" "$build"
echo "   -- pymonitor compiling, and with its programs in a warm compile cache"
PYEBPF_CACHE_DIR=$cache timeout 60 "$build/pymonitor" -p $spinner -d 0.1 >/dev/null 2>&1 || true
/usr/bin/python3 "$here/ready.py" "$rounds" compiling "$build/pymonitor -p $spinner" \
	cached "env PYEBPF_CACHE_DIR=$cache $build/pymonitor -p $spinner"
echo "   -- first event of each tracker, programs from the compile cache (the tools' first round fills it)"
PYEBPF_CACHE_DIR=$cache /usr/bin/python3 "$here/first_events.py" "$rounds" "$build"
