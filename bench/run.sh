#!/bin/sh
# make bench: every bench/*.sh in turn, each printing its own side-by-side ratios.
# Absolute times on a shared machine are noise; the ratios, measured in one run with
# the two commands interleaved, are the result.
set -u
build=${1:-build}
# every start compiles, as it did before the compile cache: the benches compare like
# with like (pymonitor.sh measures the cache on its own)
export PYEBPF_CACHE_DIR=
here=$(dirname "$0")
status=0
for b in "$here"/*.sh; do
	[ "$(basename "$b")" = run.sh ] && continue
	echo "== $(basename "$b" .sh)"
	sh "$b" "$build" || { echo "   (failed: $b)"; status=1; }
done
exit $status
