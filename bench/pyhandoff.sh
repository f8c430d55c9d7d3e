#!/bin/sh
# pyhandoff: requests/s that wrk gets from gunicorn (gthread, 1 worker x 4 threads,
# keep-alive) without and with pyhandoff tracing the server, rounds interleaved in one
# run so that the machine's noise hits both sides alike. Prints the per-round and the
# median ratio (traced / untraced).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${PYHANDOFF_BENCH_ROUNDS:-6}
secs=${PYHANDOFF_BENCH_SECONDS:-5}
if ! /usr/bin/python3 -c 'import gunicorn' 2>/dev/null || ! command -v wrk >/dev/null; then
	echo "   skipped: needs python3-gunicorn and wrk (make deps)"
	exit 0
fi
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
gpid=
tpid=
cleanup() {
	[ -n "$tpid" ] && kill -INT "$tpid" 2>/dev/null || true
	[ -n "$gpid" ] && kill "$gpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
(cd "$here/../tests/targets" && exec /usr/bin/python3 -m gunicorn -b "127.0.0.1:$port" --workers 1 \
	--worker-class gthread --threads 4 --keep-alive 30 handoff_app:app) >"$tmp/gunicorn.log" 2>&1 &
gpid=$!
i=0
until wrk -t 1 -c 1 -d 1s "http://127.0.0.1:$port/" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -gt 50 ] && { echo "   gunicorn did not start"; exit 1; }
	sleep 0.2
done

rps() {
	wrk -t 2 -c 8 -d "${secs}s" "http://127.0.0.1:$port/" | awk '/Requests\/sec/ {print $2}'
}

printf '   %-6s %12s %12s %7s\n' round "plain req/s" "traced req/s" ratio
r=1
: >"$tmp/ratios"
while [ $r -le "$rounds" ]; do
	plain=$(rps)
	"$build/pyhandoff" -p "$gpid" --children >/dev/null 2>"$tmp/tool.err" &
	tpid=$!
	i=0
	until grep -q "Hit Ctrl-C" "$tmp/tool.err" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 300 ] && { echo "   pyhandoff did not start"; cat "$tmp/tool.err"; exit 1; }
		sleep 0.1
	done
	traced=$(rps)
	kill -INT "$tpid"
	wait "$tpid" || true
	tpid=
	ratio=$(awk -v a="$traced" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')
	echo "$ratio" >>"$tmp/ratios"
	printf '   %-6s %12s %12s %7s\n' "$r" "$plain" "$traced" "$ratio"
	r=$((r + 1))
done
sort -n "$tmp/ratios" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
	printf "   median ratio traced/plain: %.3f (%d rounds of %ss, wrk -t2 -c8, gunicorn gthread 1x4)\n", m, NR, "'"$secs"'" }'
