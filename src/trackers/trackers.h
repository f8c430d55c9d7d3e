/*
 * The one list of trackers: X(name) for the tracker_ops name##_tracker defined in
 * src/trackers/name.c. Everything that runs "every tracker" reads it: pymonitor
 * (in this order: its --enable words, its --help, the order its trackers start),
 * tests/integration/trackers_in_one.c, and through `trackers_in_one --list`
 * bench/trackers.sh. What pymonitor calls a tracker and the original monitor's flags
 * are the tracker's own (tracker_ops.monitor); the variants the build's BPF check
 * compiles are in its bpf_text/name.bpf.c (src/bpf/bpfcheck.sh). A new tracker is a
 * line here.
 */
#ifndef PYEBPF_TRACKERS_H
#define PYEBPF_TRACKERS_H

#include "tracker.h"

#define PYEBPF_TRACKERS(X) \
	X(pygc)            \
	X(pygil)           \
	X(pyoffcpu)        \
	X(pyloop)          \
	X(pyhandoff)       \
	X(tcphandshake)    \
	X(tcploss)         \
	X(hostnet)         \
	X(pystack)

/* Every tracker's ops, declared: extern const struct tracker_ops pygc_tracker; ... */
#define PYEBPF_TRACKER_DECLARE(name) extern const struct tracker_ops name##_tracker;
PYEBPF_TRACKERS(PYEBPF_TRACKER_DECLARE)

/* An initializer list of their addresses: { PYEBPF_TRACKERS(PYEBPF_TRACKER_ADDRESS) } */
#define PYEBPF_TRACKER_ADDRESS(name) &name##_tracker,

#endif
