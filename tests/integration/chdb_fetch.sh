#!/bin/sh
# The newer ClickHouse of chdb_server.py (26.x, ~550 MB): chDB's libchdb.so from the
# npm registry into $PYEBPF_CACHE/chdb (default /var/cache/pyebpf). Run once; the
# tests that need it skip, saying so, when it is missing.
set -eu
CACHE=${PYEBPF_CACHE:-/var/cache/pyebpf}
mkdir -p "$CACHE/chdb"
cd "$CACHE/chdb"
npm install --no-audit --no-fund --ignore-scripts --no-save @chdb/lib-linux-x64-gnu@26.7.3-stable.1
ls -l node_modules/@chdb/lib-linux-x64-gnu/libchdb.so
