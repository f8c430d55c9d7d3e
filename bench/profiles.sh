#!/bin/sh
# Stored profiles (issue 29): bytes on disk of a row per stack sample against the
# aggregated rows and the dictionary of stacks, in ClickHouse and SQLite, for a
# 25-frame workload with ~200 distinct stacks (profiles_bench.py). Goal: >= 20x.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/profiles_bench.py" "$build" "${PROFILES_BENCH_SECONDS:-60}"
