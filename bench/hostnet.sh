#!/bin/sh
# hostnet: time of one snapshot with 50k TCP sockets open, against ss -s and ss -tan
# in the same run, in a network namespace of its own (deleted on exit).
set -eu
build=${1:-build}
here=$(dirname "$0")
ns=hnbench$$
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT INT TERM
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" sysctl -q -w net.ipv4.ip_local_port_range="1024 65535"
ip netns exec "$ns" /usr/bin/python3 "$here/hostnet_bench.py" "$build/hostnet" 24000 2000 7
