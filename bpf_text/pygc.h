/* pygc: the event record, shared by the BPF text and tools/pygc.c. */
#ifndef PYEBPF_PYGC_H
#define PYEBPF_PYGC_H

#include "pywalk.h"

/* Which hook measured a collection. */
enum pygc_source {
	PYGC_SRC_USDT = 1,     /* python:gc__start / gc__done */
	PYGC_SRC_UPROBE = 2,   /* entry and return of the collector function */
	PYGC_SRC_CALLBACK = 3, /* inside the collector: between its "start" and "stop" callback calls */
};

/* Indexes into the "counters" array: what did not go as planned. */
enum pygc_counter {
	PYGC_CNT_MAP_FULL = 0, /* the pending-collection map was full: a collection was not followed */
	PYGC_CNT_NO_START = 1, /* a collection ended whose start was not seen (tracing began mid-collection) */
	PYGC_CNT_MAX = 2,
};

struct pygc_event {
	__u64 start_ns;  /* bpf_ktime_get_ns() when the collection started */
	__u64 end_ns;    /* ... and ended */
	__s64 collected; /* unreachable objects found (collected + uncollectable); -1 unknown */
	__s32 generation;
	__u32 source;    /* enum pygc_source */
	__u32 pid, tid;  /* host ids */
	__u32 nspid, nstid; /* ids in the task's own PID namespace */
	char comm[16];
};

/* --stack: the event and the Python stack of the collecting thread (python.bpf.h) */
struct pygc_stack_event {
	struct pygc_event ev;
	__u32 status; /* enum pywalk_status */
	__u32 depth;  /* frames[] entries, innermost first; only these are sent */
	struct pywalk_frame frames[PYWALK_DEPTH_LIMIT];
};

#endif
