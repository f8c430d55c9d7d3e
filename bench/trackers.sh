#!/bin/sh
# The tracker interface's costs: each tool's start-up and RSS next to the same tool
# built from BASELINE (a git revision, default the parent of the commit that moved the
# tools onto trackers), and two trackers in one process next to the same two as
# separate processes. The tools are the trackers of the list (src/trackers/trackers.h),
# as trackers_in_one --list names them.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${TRACKERS_BENCH_ROUNDS:-5}
tools=$("$build/tests/trackers_in_one" --list) ||
	{ echo "trackers.sh: $build/tests/trackers_in_one --list failed (make bench builds it)" >&2; exit 1; }
baseline=${BASELINE:-$(git -C "$root" log --format=%H -1 --grep='^Trackers, one runner' 2>/dev/null)~1}

spin=$(mktemp)
old=$(mktemp -d)
trap 'kill $spinner 2>/dev/null || true; rm -rf "$spin" "$old"; git -C "$root" worktree prune' EXIT
echo 'while True: pass' > "$spin"
/usr/bin/python3 "$spin" & spinner=$!

if git -C "$root" worktree add -q --detach "$old/src" "$baseline" 2>/dev/null &&
	make -s -C "$old/src" BUILD="$old/build" all >/dev/null 2>&1; then
	echo "   baseline: $(git -C "$root" log --format='%h %s' -1 "$baseline")"
	for t in $tools; do
		case $t in py*) args="-p $spinner" ;; *) args="" ;; esac
		if [ ! -x "$old/build/$t" ]; then
			echo "   -- $t: not in the baseline"
			continue
		fi
		echo "   -- $t $args"
		/usr/bin/python3 "$here/ready.py" "$rounds" now "$build/$t $args" \
			baseline "$old/build/$t $args"
	done
else
	echo "   baseline $baseline could not be built: skipped the comparison with it"
fi

echo "   -- tcphandshake + pystack -p PID: one process, two processes"
/usr/bin/python3 "$here/ready.py" "$rounds" one \
	"$build/tests/trackers_in_one tcphandshake -- pystack -p $spinner" \
	two "$build/tcphandshake ;; $build/pystack -p $spinner"
