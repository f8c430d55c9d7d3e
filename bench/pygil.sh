#!/bin/sh
# pygil: throughput of a 4-thread contended CPU workload, of a threaded socket
# ping-pong and of a threaded HTTP server under wrk without pygil, with it (stacks
# on) and with --no-stacks, rounds interleaved in one run, for each hook: the futex
# tracepoints (the default) and the take_gil uprobes on pyenv 3.12 (if installed),
# the futex tracepoints and libc's timed-wait uprobes on Debian's stripped
# python3.11; BPF time per wait and BPF share of the workload's CPU, also of a floor
# program on the futex tracepoints (BCC's Python bindings: it needs the kernel
# headers bench/bcc_headers merges).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/preamble"
rounds=${PYGIL_BENCH_ROUNDS:-3}
secs=${PYGIL_BENCH_SECONDS:-2}
pyenv312=$(pyenv_python 3.12)
# without headers bcc_headers exits, which would end this bench too: only the floor needs them
if ls -d /usr/src/linux-headers-*-common >/dev/null 2>&1; then
	. "$here/bcc_headers"
fi
/usr/bin/python3 "$here/pygil_bench.py" "$build/pygil" "$rounds" "$secs" \
	${pyenv312:+"futex=$pyenv312"} ${pyenv312:+"take_gil=$pyenv312"} \
	"futex=/usr/bin/python3.11" "condvar=/usr/bin/python3.11"
