#!/bin/sh
# Kernel stack names: the time and memory of pyebpf's kallsyms table (read by pyoffcpu
# at its start) against libbcc's kernel symcache (what it replaced), each from a fresh
# process, alternating; medians and ranges over the rounds.
set -eu
build=${1:-build}
"$build/tests/kallsyms_cost" "${KALLSYMS_BENCH_ROUNDS:-7}" | /usr/bin/python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    name, ms, kb, n = line.split()
    rows.setdefault(name, []).append((float(ms), int(kb), int(n)))
print("   %-9s %6s  %-20s %-20s %s" % ("table", "rounds", "ms med [min-max]", "RSS MB med [min-max]", "symbols"))
for name in ("kallsyms", "libbcc"):
    r = rows.get(name, [])
    if not r:
        print("   %-9s none" % name)
        continue
    ms, kb = [x[0] for x in r], [x[1] for x in r]
    print("   %-9s %6d  %-20s %-20s %s" % (
        name, len(r), "%.1f [%.1f-%.1f]" % (statistics.median(ms), min(ms), max(ms)),
        "%.1f [%.1f-%.1f]" % (statistics.median(kb) / 1024, min(kb) / 1024, max(kb) / 1024),
        r[0][2] if name == "kallsyms" else "-"))
'
