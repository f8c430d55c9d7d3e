#!/bin/sh
# pygc: throughput of a workload doing thousands of generation-0 collections per second
# with pygc attached over without, rounds interleaved in one run, on the USDT path
# (Debian's python3.11) and the uprobe path (pyenv 3.12, if installed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
rounds=${PYGC_BENCH_ROUNDS:-8}
secs=${PYGC_BENCH_SECONDS:-2}
pyenv312=$(pyenv_python 3.12)
exec /usr/bin/python3 "$here/pygc_bench.py" "$build/pygc" "$rounds" "$secs" \
	"usdt=/usr/bin/python3.11" ${pyenv312:+"uprobe=$pyenv312"}
